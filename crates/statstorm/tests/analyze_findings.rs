//! analyze's findings are typed values: each has an id, a severity and the
//! figures behind it (`evidence`), and the JSON exporter adds the sentence
//! the text report prints.

mod common;

use serde_json::Value;

fn analyze(args: &[&str]) -> String {
    common::run("analyze", args)
}

#[test]
fn findings_carry_severity_and_evidence_and_the_text_report_says_them() {
    let j: Value = serde_json::from_str(&analyze(&["--sample", "--format", "json"])).unwrap();
    let f = j["findings"].as_array().unwrap();
    let walks = f
        .iter()
        .find(|x| x["id"] == "realpath_walks")
        .expect("the sample (open_basedir) walks");
    assert_eq!(walks["severity"], "warning");
    let e = &walks["evidence"];
    assert_eq!(e["cause"], "keeps_nothing", "{e}");
    let (lstats, walks_n, rewalks) = (
        e["walk_lstats"].as_u64().unwrap(),
        e["walks"].as_u64().unwrap(),
        e["rewalks"].as_u64().unwrap(),
    );
    assert!(
        lstats >= walks_n && walks_n >= rewalks && rewalks > 0,
        "{e}"
    );
    // the sentence is the text report's, with the evidence's figures
    let text = walks["text"].as_str().unwrap();
    assert!(text.contains(&format!("{walks_n} walks")), "{text}");
    assert!(text.contains(&format!("{rewalks} of them")), "{text}");
    let report = analyze(&["--sample"]);
    assert!(report.contains(text), "the text report lacks: {text}");
    let top = f.iter().find(|x| x["id"] == "top_syscall").unwrap();
    assert_eq!(top["severity"], "info");
    assert_eq!(
        top["evidence"]["metadata_calls"],
        j["totals"]["metadata_calls"]
    );
}
