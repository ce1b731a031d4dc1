//! "Did you mean ...?": the known word nearest to a misspelled one.

/// The word of `known` nearest to `word` by Damerau-Levenshtein distance,
/// when it is at most a third of `word`'s length away (at least one edit
/// allowed); of words at the same distance, the smallest.
pub fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.len() / 3).max(1);
    known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(word, k), k))
        .filter(|&(d, _)| d <= limit)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    #[test]
    fn near_words_are_found_far_ones_are_not() {
        let known = ["actimeo", "acregmin", "nocto"];
        assert_eq!(super::closest("actime", known), Some("actimeo"));
        assert_eq!(super::closest("nocot", known), Some("nocto"));
        assert_eq!(super::closest("foo", known), None);
    }
}
