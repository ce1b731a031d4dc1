//! Byte-level helpers for the argument and result text of one syscall line:
//! splitting arguments at top-level commas, decoding strace's quoted strings,
//! `-y` fd decorations, symbolic flag sets, results and durations.
//!
//! Everything here works on `&[u8]` and allocates nothing except into the
//! caller's scratch buffer.

use crate::event::Flags;
use memchr::{memchr2, memrchr};

/// Most arguments any decoded syscall has (`mmap` has 6).
pub(crate) const MAX_ARGS: usize = 8;

/// Argument slices of one call, as `(start, end)` offsets into the args text.
#[derive(Default)]
pub(crate) struct ArgList {
    pub n: usize,
    pub spans: [(u32, u32); MAX_ARGS],
}

impl ArgList {
    pub fn get<'a>(&self, text: &'a [u8], i: usize) -> Option<&'a [u8]> {
        if i >= self.n {
            return None;
        }
        let (s, e) = self.spans[i];
        Some(trim(&text[s as usize..e as usize]))
    }
}

/// `s` without the blanks at either end (and CRs at the end).
///
/// Most texts trimmed are arguments after a comma: one blank in front,
/// none at the end. That case takes a byte test at each end; the loops
/// (`trim_any`) run only when a second blank is there. The loops alone
/// took ~80 instructions a line (16.3 M of 421 M on the 30 MB slice of the
/// benchmark log, callgrind; 409 M with this).
#[inline(always)]
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let s = match s {
        [b' ', rest @ ..] => rest,
        _ => s,
    };
    match (s.first(), s.last()) {
        (Some(b' ' | b'\t'), _) | (_, Some(b' ' | b'\t' | b'\r')) => trim_any(s),
        _ => s,
    }
}

/// [`trim`]'s general steps.
#[inline(never)]
fn trim_any(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r'] = s {
        s = rest;
    }
    s
}

/// Skips a quoted string starting at `s[i] == b'"'`; returns the index just
/// after the closing quote, or `None` if the string is not closed.
#[inline]
fn skip_string(s: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        let j = i + memchr2(b'"', b'\\', &s[i..])?;
        if s[j] == b'\\' {
            i = j + 2;
            if i > s.len() {
                return None;
            }
        } else {
            return Some(j + 1);
        }
    }
}

/// The end (the index after its `>`) of the `-y`/`-yy`/`-Y` decoration
/// that opens at `s[i] == b'<'`: `3</srv/a, b (old)/x.php>`,
/// `AT_FDCWD</srv/www>`, `1</dev/null<char 1:3>>`,
/// `5<TCP:[127.0.0.1:9000->127.0.0.1:40312]>`, `1234<php-fpm8.2>`. Its
/// text is not strace syntax: commas, brackets, parentheses and quotes in
/// it are a path's bytes, not argument structure (strace escapes only `<`,
/// `>` and non-printable bytes in it, `printfd` and `print_comm_str` in
/// src/util.c and src/strace.c). In a path (`/...`) the first `>` closes
/// (a `<` opens the nested `-yy` device text); elsewhere a `>` inside
/// `[...]` is a socket's `->`. `None` when nothing closes it: the `<` is
/// then an ordinary byte.
#[inline]
pub(crate) fn deco_end(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i + 1) == Some(&b'/') {
        let mut depth = 1usize;
        let mut j = i + 1;
        loop {
            let k = j + find2(&s[j..], b'<', b'>')?;
            if s[k] == b'<' {
                depth += 1;
            } else {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            j = k + 1;
        }
    }
    let (mut depth, mut j) = (0usize, i);
    let mut brackets = 0usize;
    while j < s.len() {
        match s[j] {
            b'<' => depth += 1,
            b'>' if brackets == 0 => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            b'[' => brackets += 1,
            b']' => brackets = brackets.saturating_sub(1),
            _ => {}
        }
        j += 1;
    }
    None
}

/// Finds the `)` that closes the argument list. `s` starts just after the
/// opening `(`. Parentheses inside quoted strings and fd decorations
/// ([`deco_end`]) do not count. The parser uses [`scan_call`]; this is the
/// reference its test compares with.
#[cfg(test)]
pub(crate) fn find_close_paren(s: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        let j = i + s[i..].iter().position(|c| b"\"()<".contains(c))?;
        match s[j] {
            b'"' => i = skip_string(s, j)?,
            b'<' => i = deco_end(s, j).unwrap_or(j + 1),
            b'(' => {
                depth += 1;
                i = j + 1
            }
            _ => {
                if depth == 0 {
                    return Some(j);
                }
                depth -= 1;
                i = j + 1;
            }
        }
    }
    None
}

/// The bytes [`scan_call`] acts on: quotes, brackets, commas, and the `<`
/// that opens an fd decoration.
#[cfg(any(test, not(target_arch = "x86_64")))]
static CALL_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut k = 0;
    let special = b"\"()[]{},<";
    while k < special.len() {
        t[special[k] as usize] = true;
        k += 1;
    }
    t
};

/// The index of the first byte at or after `i` that [`scan_call`] acts on
/// (`s.len()` if none): 16 bytes per step with SSE2 (part of every x86-64
/// CPU), the rest byte by byte.
#[cfg(test)]
fn next_call_special(s: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        while i + 16 <= s.len() {
            let mask = call_special_mask16(s[i..i + 16].try_into().unwrap());
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    while i < s.len() && !CALL_SPECIAL[s[i] as usize] {
        i += 1;
    }
    i
}

/// Bit k set when byte k of `b` is one of [`CALL_SPECIAL`]'s bytes.
#[cfg(all(test, target_arch = "x86_64"))]
fn call_special_mask16(b: &[u8; 16]) -> u32 {
    masks16(b).0
}

/// (`spec`, `qb`, `comma`, `gt`) masks of the first 64 bytes of `s`, or
/// of all of it when shorter (bytes past its end have no bit): 16 bytes per
/// compare, the last piece zero-padded (a zero byte is in no set).
#[inline]
fn masks_upto64(s: &[u8]) -> (u64, u64, u64, u64) {
    let s = &s[..s.len().min(64)];
    let (mut spec, mut qb, mut comma, mut gt) = (0u64, 0u64, 0u64, 0u64);
    let mut k = 0;
    while k < s.len() {
        let (sp, q, c, g) = match s.get(k..k + 16) {
            Some(piece) => masks16(piece.try_into().unwrap()),
            // The tail: the last 16 bytes, shifted down to the tail's first
            // (no copy; bits past the end are zero after the shift).
            None if s.len() >= 16 => {
                let (sp, q, c, g) = masks16(s[s.len() - 16..].try_into().unwrap());
                let drop = 16 - (s.len() - k);
                (sp >> drop, q >> drop, c >> drop, g >> drop)
            }
            None => {
                let mut b = [0u8; 16];
                b[..s.len() - k].copy_from_slice(&s[k..]);
                masks16(&b)
            }
        };
        spec |= (sp as u64) << k;
        qb |= (q as u64) << k;
        comma |= (c as u64) << k;
        gt |= (g as u64) << k;
        k += 16;
    }
    (spec, qb, comma, gt)
}

/// [`masks16`] without SSE2.
#[cfg(not(target_arch = "x86_64"))]
fn masks16(b: &[u8; 16]) -> (u32, u32, u32, u32) {
    let mut spec = 0u32;
    let mut qb = 0u32;
    let mut comma = 0u32;
    let mut gt = 0u32;
    for (k, &c) in b.iter().enumerate() {
        spec |= (CALL_SPECIAL[c as usize] as u32) << k;
        qb |= ((c == b'"' || c == b'\\') as u32) << k;
        comma |= ((c == b',') as u32) << k;
        gt |= ((c == b'>') as u32) << k;
    }
    (spec, qb, comma, gt)
}

/// The special-byte mask (bit k set when byte k of `b` is one of
/// `"(),[]{}<`: `(`/`)` are 0x28/0x29, equal under `& 0xfe`; `[`/`{` are
/// 0x5b/0x7b and `]`/`}` 0x5d/0x7d, equal under `& 0xdf`, which keeps the
/// high bit, so no byte >= 0x80 matches), the quote-or-backslash mask, the
/// comma mask and the `>` mask of 16 bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
fn masks16(b: &[u8; 16]) -> (u32, u32, u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86-64 baseline; the one load reads the
    // 16 bytes of `b` (unaligned load allowed).
    unsafe {
        let v = _mm_loadu_si128(b.as_ptr() as *const __m128i);
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let bslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        let paren = _mm_and_si128(v, _mm_set1_epi8(0xfeu8 as i8));
        let bracket = _mm_and_si128(v, _mm_set1_epi8(0xdfu8 as i8));
        let comma = _mm_cmpeq_epi8(v, _mm_set1_epi8(b',' as i8));
        let lt = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'<' as i8));
        let spec = _mm_or_si128(
            _mm_or_si128(_mm_or_si128(quote, comma), lt),
            _mm_or_si128(
                _mm_cmpeq_epi8(paren, _mm_set1_epi8(b'(' as i8)),
                _mm_or_si128(
                    _mm_cmpeq_epi8(bracket, _mm_set1_epi8(b'[' as i8)),
                    _mm_cmpeq_epi8(bracket, _mm_set1_epi8(b']' as i8)),
                ),
            ),
        );
        (
            _mm_movemask_epi8(spec) as u32,
            _mm_movemask_epi8(_mm_or_si128(quote, bslash)) as u32,
            _mm_movemask_epi8(comma) as u32,
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'>' as i8))) as u32,
        )
    }
}

/// [`masks_upto64`] with AVX2: 32 bytes per compare, half the
/// instructions (the SSE2 masks were a third of [`scan_call`]'s).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn masks_upto64_avx2(s: &[u8]) -> (u64, u64, u64, u64) {
    use std::arch::x86_64::*;
    let s = &s[..s.len().min(64)];
    let (mut spec, mut qb, mut comma, mut gt) = (0u64, 0u64, 0u64, 0u64);
    let mut k = 0;
    while k < s.len() {
        let mut pad = [0u8; 32];
        // The tail: the last 32 bytes, their masks shifted down to the
        // tail's first byte (no copy; bits past the end are zero after the
        // shift); a zero-padded copy when the text is shorter than 32.
        let (piece, drop): (&[u8; 32], u32) = match s.get(k..k + 32) {
            Some(p) => (p.try_into().unwrap(), 0),
            None if s.len() >= 32 => (
                s[s.len() - 32..].try_into().unwrap(),
                (32 - (s.len() - k)) as u32,
            ),
            None => {
                pad[..s.len() - k].copy_from_slice(&s[k..]);
                (&pad, 0)
            }
        };
        // The same compares as `masks16`, 32 bytes at a time. SAFETY: the
        // CPU has AVX2 (this function's contract); the one load reads the
        // 32 bytes of `piece` (unaligned load allowed).
        let v = _mm256_loadu_si256(piece.as_ptr() as *const __m256i);
        let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
        let bslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        let paren = _mm256_and_si256(v, _mm256_set1_epi8(0xfeu8 as i8));
        let bracket = _mm256_and_si256(v, _mm256_set1_epi8(0xdfu8 as i8));
        let cm = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b',' as i8));
        let lt = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'<' as i8));
        let sp = _mm256_or_si256(
            _mm256_or_si256(_mm256_or_si256(quote, cm), lt),
            _mm256_or_si256(
                _mm256_cmpeq_epi8(paren, _mm256_set1_epi8(b'(' as i8)),
                _mm256_or_si256(
                    _mm256_cmpeq_epi8(bracket, _mm256_set1_epi8(b'[' as i8)),
                    _mm256_cmpeq_epi8(bracket, _mm256_set1_epi8(b']' as i8)),
                ),
            ),
        );
        spec |= ((_mm256_movemask_epi8(sp) as u32 >> drop) as u64) << k;
        qb |= ((_mm256_movemask_epi8(_mm256_or_si256(quote, bslash)) as u32 >> drop) as u64) << k;
        comma |= ((_mm256_movemask_epi8(cm) as u32 >> drop) as u64) << k;
        let g = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'>' as i8));
        gt |= ((_mm256_movemask_epi8(g) as u32 >> drop) as u64) << k;
        k += 32;
    }
    (spec, qb, comma, gt)
}

/// `find_close_paren` (a test reference) and [`split_args`] (with `want` = [`MAX_ARGS`]) in
/// one pass: returns the index of the `)` that closes the argument list
/// (parentheses counted outside quoted strings, exactly as
/// `find_close_paren`) and fills `out` with the top-level arguments before
/// it (commas outside strings and outside every bracket kind). For
/// well-nested brackets, which is all strace prints, the spans are those
/// of `split_args` on the text before the `)`.
///
/// The bytes it acts on are found through bit masks of 64 bytes at a time
/// ([`masks_upto64`]: `spec` marks quotes, brackets, commas and the `<`
/// of fd decorations, `qb` the quotes and backslashes that end a run
/// inside a string, `comma` the commas, which are acted on without reading
/// the byte, `gt` the `>` that most decorations end at), each set bit
/// taken in turn and cleared, strings skipped by their `qb` bits and
/// decorations as [`deco_end`] reads them: one pass
/// of vector compares per 64 bytes instead of one per byte acted on (the
/// byte-by-byte version took 19% of the one-thread parser's instructions),
/// and a few instructions per bit (recomputing the mask from the byte
/// index for each bit took a quarter of the scan's instructions).
///
/// With AVX2 (checked once per process), the masks are computed 32 bytes
/// at a time. Inlined: the dispatch as a call of its own took ~20
/// instructions a line.
#[inline]
pub(crate) fn scan_call(s: &[u8], out: &mut ArgList) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { scan_call_avx2(s, out) };
    }
    scan_call_with(s, out, masks_upto64)
}

/// [`scan_call`] with AVX2 masks.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scan_call_avx2(s: &[u8], out: &mut ArgList) -> Option<usize> {
    // SAFETY: the CPU has AVX2 (this function's contract).
    scan_call_with(s, out, |t| unsafe { masks_upto64_avx2(t) })
}

/// [`crate::bench::scan_call`].
pub(crate) fn scan_call_by(s: &[u8], how: &str) -> Option<(Option<usize>, usize)> {
    let mut out = ArgList::default();
    let r = match how {
        "auto" => scan_call(s, &mut out),
        "sse2" => scan_call_with(s, &mut out, masks_upto64),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2.
        "avx2" if std::is_x86_feature_detected!("avx2") => unsafe { scan_call_avx2(s, &mut out) },
        _ => return None,
    };
    Some((r, out.n))
}

/// [`scan_call`]'s body, with the masks of up to 64 bytes from `masks`
/// (inlined into each caller, so each gets its own instruction set).
#[inline(always)]
fn scan_call_with(
    s: &[u8],
    out: &mut ArgList,
    masks: impl Fn(&[u8]) -> (u64, u64, u64, u64) + Copy,
) -> Option<usize> {
    out.n = 0;
    let mut st = CallScan::default();
    // The next window starts here: the first byte not acted on yet.
    let mut pos = 0usize;
    'window: while pos < s.len() {
        let base = pos;
        let (spec, qb, comma, gt) = masks(&s[base..]);
        let mut m = spec;
        while m != 0 {
            let k = m.trailing_zeros() as usize;
            let i = base + k;
            // A comma (most of the bytes acted on) known from its mask
            // bit: no load of the byte and no dispatch on it
            // (`examples/scan_bench`, best of 9 passes: 37.9 -> 36.9
            // ns/line on the 150 MB slice, 36.3 -> 34.5 on 100,000
            // `newfstatat` lines).
            if comma & (1u64 << k) != 0 {
                st.comma(i, out);
                m &= m - 1;
                continue;
            }
            let c = s[i];
            if c == b'<' {
                // An fd decoration: nothing in it is structure. With no
                // special byte before the window's next `>` (the common
                // case: a path, a `-Y` name) that `>` closes it, and there
                // is no bit in it to clear but its own. Otherwise (a `,`,
                // `(`, `"` ... in a path, a nested `-yy` device text, a
                // socket's `->` inside `[...]`) `deco_end` reads it.
                let g = gt & (u64::MAX << k);
                let rest = m & (m - 1);
                if g != 0 && rest & ((1u64 << g.trailing_zeros()) - 1) == 0 {
                    m = rest;
                    continue;
                }
                match deco_end(s, i) {
                    Some(e) if e - base >= 64 => {
                        pos = e;
                        continue 'window;
                    }
                    Some(e) => m &= !((1u64 << (e - base)) - 1),
                    None => m = rest,
                }
                continue;
            }
            if c != b'"' {
                if st.special(c, i, out) {
                    return Some(i);
                }
                m &= m - 1;
                continue;
            }
            // A string: its closing quote is the next quote bit not
            // escaped by a backslash bit.
            let mut from = k + 1;
            loop {
                if from >= 64 {
                    pos = string_end(s, base + from, masks)?;
                    continue 'window;
                }
                let q = qb & (u64::MAX << from);
                if q == 0 {
                    pos = string_end(s, base + 64, masks)?;
                    continue 'window;
                }
                let j = q.trailing_zeros() as usize;
                if s[base + j] == b'\\' {
                    from = j + 2;
                    continue;
                }
                // Clears the bits up to the closing quote (all of them
                // when it is the window's last byte).
                m &= !(2u64 << j).wrapping_sub(1);
                break;
            }
        }
        pos = base + 64;
    }
    None
}

/// The index just after the quote that closes a string whose bytes from
/// `p` on are still to be searched (a backslash escapes the byte after it),
/// as `skip_string` finds it; `None` when the text ends first.
#[inline(always)]
fn string_end(
    s: &[u8],
    mut p: usize,
    masks: impl Fn(&[u8]) -> (u64, u64, u64, u64),
) -> Option<usize> {
    while p < s.len() {
        let qb = masks(&s[p..]).1;
        if qb == 0 {
            p += 64;
            continue;
        }
        let j = p + qb.trailing_zeros() as usize;
        if s[j] == b'"' {
            return Some(j + 1);
        }
        p = j + 2;
    }
    None
}

/// What [`scan_call`] keeps between the bytes it acts on, and what each
/// of them (but a quote) does.
#[derive(Default)]
struct CallScan {
    start: usize,
    paren: usize,
    other: usize,
}

impl CallScan {
    /// Acts on the special byte `c` at `i`; true when it is the `)` that
    /// closes the argument list.
    #[inline]
    fn special(&mut self, c: u8, i: usize, out: &mut ArgList) -> bool {
        match c {
            b'(' => self.paren += 1,
            b')' => {
                if self.paren == 0 {
                    if out.n < MAX_ARGS && (self.start < i || out.n > 0) {
                        out.spans[out.n] = (self.start as u32, i as u32);
                        out.n += 1;
                    }
                    return true;
                }
                self.paren -= 1;
            }
            b'[' | b'{' => self.other += 1,
            b']' | b'}' => self.other = self.other.saturating_sub(1),
            _ => self.comma(i, out),
        }
        false
    }

    /// Acts on the comma at `i`: it ends an argument outside every bracket.
    #[inline(always)]
    fn comma(&mut self, i: usize, out: &mut ArgList) {
        if self.paren == 0 && self.other == 0 && out.n < MAX_ARGS {
            out.spans[out.n] = (self.start as u32, i as u32);
            out.n += 1;
            self.start = i + 1;
        }
    }
}

/// [`scan_call`] as it was before its bit masks: a 16-byte search from
/// each byte it stops at, `memchr2` per string. The reference its test
/// compares with.
#[cfg(test)]
pub(crate) fn scan_call_bytewise(s: &[u8], out: &mut ArgList) -> Option<usize> {
    out.n = 0;
    let mut st = CallScan::default();
    let mut i = 0usize;
    loop {
        i = next_call_special(s, i);
        let c = *s.get(i)?;
        if c == b'"' {
            i = skip_string(s, i)?;
            continue;
        }
        if c == b'<' {
            i = deco_end(s, i).unwrap_or(i + 1);
            continue;
        }
        if st.special(c, i, out) {
            return Some(i);
        }
        i += 1;
    }
}

/// Skips a bracketed group starting at `s[i]` (`{`, `[` or `(`); returns
/// the index after its closing bracket. Other bracket kinds inside are
/// balanced in strace's output, so only this kind is counted; quoted
/// strings are skipped.
#[inline]
fn skip_group(s: &[u8], i: usize) -> Option<usize> {
    let open = s[i];
    let close = match open {
        b'{' => b'}',
        b'[' => b']',
        _ => b')',
    };
    let mut depth = 1usize;
    let mut j = i + 1;
    loop {
        let k = j + s[j..]
            .iter()
            .position(|&c| c == b'"' || c == b'<' || c == open || c == close)?;
        match s[k] {
            b'"' => j = skip_string(s, k)?,
            b'<' => j = deco_end(s, k).unwrap_or(k + 1),
            c if c == open => {
                depth += 1;
                j = k + 1;
            }
            _ => {
                depth -= 1;
                j = k + 1;
                if depth == 0 {
                    return Some(j);
                }
            }
        }
    }
}

/// The bytes [`split_args`] acts on: quotes, opening brackets, commas, the
/// `<` of an fd decoration.
static SPLIT_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'<' as usize] = true;
    t[b'(' as usize] = true;
    t[b'[' as usize] = true;
    t[b'{' as usize] = true;
    t[b',' as usize] = true;
    t
};

/// Splits `s` (the text between the parentheses) at top-level commas,
/// stopping once `want` arguments are found (the last one found runs to
/// its comma, or to the end).
pub(crate) fn split_args(s: &[u8], out: &mut ArgList, want: usize) {
    out.n = 0;
    let want = want.min(MAX_ARGS);
    let mut start = 0usize;
    let mut i = 0usize;
    while i < s.len() {
        // Plain bytes skipped in a tight loop over a class table.
        while i < s.len() && !SPLIT_SPECIAL[s[i] as usize] {
            i += 1;
        }
        if i >= s.len() {
            break;
        }
        match s[i] {
            b'"' => match skip_string(s, i) {
                Some(j) => {
                    i = j;
                    continue;
                }
                None => break,
            },
            b'(' | b'[' | b'{' => match skip_group(s, i) {
                Some(j) => {
                    i = j;
                    continue;
                }
                None => break,
            },
            b'<' => {
                if let Some(j) = deco_end(s, i) {
                    i = j;
                    continue;
                }
            }
            b',' => {
                out.spans[out.n] = (start as u32, i as u32);
                out.n += 1;
                start = i + 1;
                if out.n >= want {
                    return;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if out.n < want && (start < s.len() || out.n > 0) {
        out.spans[out.n] = (start as u32, s.len() as u32);
        out.n += 1;
    }
}

/// An `execve` argument array as strace prints it (`["php", "-d", "k=v",
/// "x.php"]`): its strings, each followed by a NUL byte, appended to
/// `out`. A string strace cut short (`"..."...`, at `-s`) or an array it
/// cut (`...`) ends the list, the cut string left out. False when `argv`
/// is not an array (`0x7ffd...`, a NULL argv).
pub(crate) fn exec_argv(argv: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(inner) = argv.strip_prefix(b"[") else {
        return false;
    };
    let mut i = 0usize;
    while i < inner.len() {
        match inner[i] {
            b'"' => {
                let Some(end) = skip_string(inner, i) else {
                    break;
                };
                if inner[end..].starts_with(b"...") {
                    break;
                }
                unescape(&inner[i + 1..end - 1], out);
                out.push(0);
                i = end;
            }
            b']' | b'.' => break,
            _ => i += 1,
        }
    }
    true
}

/// Decodes a quoted strace string argument (`"a\x62\"c"` or `"abc"...`) into
/// raw bytes in `out`. Returns `Some(truncated)` when `s` is a quoted string.
pub(crate) fn decode_string(s: &[u8], out: &mut Vec<u8>) -> Option<bool> {
    out.clear();
    if s.first() != Some(&b'"') {
        return None;
    }
    let end = skip_string(s, 0)?;
    unescape(&s[1..end - 1], out);
    let truncated = s[end..].starts_with(b"...");
    Some(truncated)
}

/// [`decode_string`] without the copy when the string has no escape: the
/// decoded bytes are then a slice of `s`, else of `out`.
///
/// Inlined into each caller, like [`decode_deco_ref`]: as calls (138k
/// and 157k on s30.log, ~87 and ~47 instructions each) their register
/// saves and argument moves cost more than the search (analyze, both:
/// 521.0 M -> 515.9 M).
#[inline(always)]
pub(crate) fn decode_string_ref<'a>(s: &'a [u8], out: &'a mut Vec<u8>) -> Option<(&'a [u8], bool)> {
    if s.first() != Some(&b'"') {
        return None;
    }
    let j = 1 + quote_or_backslash(&s[1..])?;
    if s[j] == b'"' {
        return Some((&s[1..j], s[j + 1..].starts_with(b"...")));
    }
    let trunc = decode_string(s, out)?;
    Some((&out[..], trunc))
}

/// The first `"` or `\\` of `s`.
#[inline]
fn quote_or_backslash(s: &[u8]) -> Option<usize> {
    find2(s, b'"', b'\\')
}

/// The first index of a byte of `s` equal to `a` or `b` (`a == b` for one
/// byte): for the short texts of one argument (a path, a decoration, a
/// flag set) this costs a fraction of `memchr`'s dispatch and setup (78
/// instructions per call on 20-byte decorations) and of a search through
/// zero-padded copies of the tail.
#[inline]
pub(crate) fn find2(s: &[u8], a: u8, b: u8) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        find2_sse2(s, a, b)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        find2_swar(s, a, b)
    }
}

/// [`find2`] with SSE2 (part of every x86-64 CPU): 16 bytes per compare;
/// the last, partial piece is the last 16 bytes of `s` (its bytes already
/// searched have no match), and a text under 16 bytes is one zero-padded
/// register built from word loads ([`load_upto16`]), with the padding's
/// bits masked off.
#[cfg(target_arch = "x86_64")]
#[inline]
fn find2_sse2(s: &[u8], a: u8, b: u8) -> Option<usize> {
    use std::arch::x86_64::*;
    let hits = |v: __m128i| -> u32 {
        // SAFETY: SSE2 is part of the x86-64 baseline; register operations only.
        unsafe {
            let ea = _mm_cmpeq_epi8(v, _mm_set1_epi8(a as i8));
            let eb = _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
            _mm_movemask_epi8(_mm_or_si128(ea, eb)) as u32
        }
    };
    // SAFETY: SSE2 is part of the x86-64 baseline; the load reads the 16
    // bytes of `p` (unaligned allowed).
    let load = |p: &[u8; 16]| unsafe { _mm_loadu_si128(p.as_ptr() as *const __m128i) };
    let n = s.len();
    if n < 16 {
        let k = load_upto16(s);
        // SAFETY: SSE2 is part of the x86-64 baseline; registers only.
        let v = unsafe { _mm_set_epi64x((k >> 64) as i64, k as i64) };
        let m = hits(v) & ((1u32 << n) - 1);
        return (m != 0).then(|| m.trailing_zeros() as usize);
    }
    let mut i = 0;
    while i + 16 <= n {
        let m = hits(load(s[i..i + 16].try_into().unwrap()));
        if m != 0 {
            return Some(i + m.trailing_zeros() as usize);
        }
        i += 16;
    }
    if i < n {
        let m = hits(load(s[n - 16..].try_into().unwrap()));
        if m != 0 {
            return Some(n - 16 + m.trailing_zeros() as usize);
        }
    }
    None
}

/// [`find2`] without SIMD: 8 bytes per step as a word, each byte equal to
/// `a` or `b` found as a zero byte of the word xor the byte repeated. The
/// zero-byte test `(x - 0x01..) & !x & 0x80..` can also mark a byte just
/// above a zero byte (the borrow), never one below the first, so its
/// lowest mark is exact.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn find2_swar(s: &[u8], a: u8, b: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(LO) & !x & HI;
    let hits = |w: u64| zero(w ^ (LO * a as u64)) | zero(w ^ (LO * b as u64));
    let w8 = |p: &[u8]| u64::from_le_bytes(p.try_into().unwrap());
    let n = s.len();
    if n == 0 {
        return None;
    }
    if n < 8 {
        let k = load_upto16(s) as u64;
        // The padding (zero bytes) masked off: a or b may be zero.
        let m = hits(k) & (HI >> (8 * (8 - n)));
        return (m != 0).then(|| m.trailing_zeros() as usize / 8);
    }
    let mut i = 0;
    while i + 8 <= n {
        let m = hits(w8(&s[i..i + 8]));
        if m != 0 {
            return Some(i + m.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    if i < n {
        let m = hits(w8(&s[n - 8..]));
        if m != 0 {
            return Some(n - 8 + m.trailing_zeros() as usize / 8);
        }
    }
    None
}

/// At most 16 bytes as a zero-padded little-endian `u128`, built from
/// (overlapping) word loads: a byte copy into a stack buffer read back as
/// one word stalls on store forwarding.
#[inline]
pub(crate) fn load_upto16(s: &[u8]) -> u128 {
    let n = s.len();
    debug_assert!(n <= 16);
    let w8 = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap());
    let w4 = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap()) as u64;
    let (lo, hi) = if n >= 8 {
        // bytes 8..n: the last 8 bytes shifted down past those of 0..8
        let hi = if n > 8 {
            w8(&s[n - 8..]) >> ((16 - n) * 8)
        } else {
            0
        };
        (w8(&s[..8]), hi)
    } else if n >= 4 {
        // two overlapping 4-byte words: the shared bytes are equal
        (w4(&s[..4]) | w4(&s[n - 4..]) << ((n - 4) * 8), 0)
    } else if n > 0 {
        // bytes 0, n/2 and n-1 cover 1 to 3 bytes
        let v = s[0] as u64 | (s[n / 2] as u64) << (n / 2 * 8) | (s[n - 1] as u64) << ((n - 1) * 8);
        (v, 0)
    } else {
        (0, 0)
    };
    (hi as u128) << 64 | lo as u128
}

#[inline]
fn hexval(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Undoes strace's escaping (strace `util.c:string_quote`): `\\`, `\"`,
/// `\n`, `\t`, `\r`, `\v`, `\f`, `\xHH` and 1-3 digit octal.
pub(crate) fn unescape(s: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < s.len() {
        let Some(j) = memchr::memchr(b'\\', &s[i..]) else {
            out.extend_from_slice(&s[i..]);
            return;
        };
        out.extend_from_slice(&s[i..i + j]);
        i += j + 1;
        let Some(&c) = s.get(i) else {
            out.push(b'\\');
            return;
        };
        i += 1;
        match c {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'x' => {
                let h1 = s.get(i).copied().and_then(hexval);
                let h2 = s.get(i + 1).copied().and_then(hexval);
                match (h1, h2) {
                    (Some(a), Some(b)) => {
                        out.push(a * 16 + b);
                        i += 2;
                    }
                    (Some(a), None) => {
                        out.push(a);
                        i += 1;
                    }
                    _ => out.extend_from_slice(b"\\x"),
                }
            }
            b'0'..=b'7' => {
                let mut v: u32 = (c - b'0') as u32;
                let mut k = 0;
                while k < 2 {
                    match s.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + (d - b'0') as u32;
                            i += 1;
                            k += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v as u8);
            }
            other => out.push(other),
        }
    }
}

/// An fd argument as printed: `3`, `3</path>` (with `-y`), `AT_FDCWD`,
/// `AT_FDCWD</cwd>` or `3<TCP:[...]>` / `3<socket:[...]>` (with `-yy`).
pub(crate) struct FdArg<'a> {
    pub fd: Option<i32>,
    pub at_fdcwd: bool,
    /// Raw (still escaped) decoration text, without the angle brackets.
    pub deco: Option<&'a [u8]>,
    /// `-y` marked the file as unlinked: `3</tmp/f>(deleted)`.
    pub deleted: bool,
}

/// What strace 6 prints after an fd's `-y` decoration when the file has
/// been unlinked while open (`/proc/PID/fd/N` reads `PATH (deleted)`).
const DELETED: &[u8] = b"(deleted)";

/// An fd argument's text as an [`FdArg`].
///
/// Inlined (the two shapes below are a few compares; as a call, analyze
/// took 515.9 M, now 512.2 M); the general steps stay a call.
#[inline(always)]
pub(crate) fn parse_fd(s: &[u8]) -> FdArg<'_> {
    // The shapes of a `-y` log, `3</a/b>` and `AT_FDCWD</a/b>`, by
    // position: ending in `>`, the text has no `(deleted)`, and its first
    // `<` is the one after the digit or `AT_FDCWD` (the general steps took
    // ~94 instructions per call, 162k calls on s30.log; now 15.3 M -> 8.1 M
    // in all).
    if let [c @ b'0'..=b'9', b'<', deco @ .., b'>'] = s {
        return FdArg {
            fd: Some((c - b'0') as i32),
            at_fdcwd: false,
            deco: Some(deco),
            deleted: false,
        };
    }
    // `AT_FDCWD<` as a word and a byte (the slice pattern compared nine
    // bytes one by one).
    if s.len() >= 10
        && u64::from_le_bytes(s[..8].try_into().unwrap()) == u64::from_le_bytes(*b"AT_FDCWD")
        && s[8] == b'<'
        && s[s.len() - 1] == b'>'
    {
        let deco = &s[9..s.len() - 1];
        return FdArg {
            fd: None,
            at_fdcwd: true,
            deco: Some(deco),
            deleted: false,
        };
    }
    parse_fd_any(s)
}

/// [`parse_fd`] for every shape.
#[inline(never)]
fn parse_fd_any(s: &[u8]) -> FdArg<'_> {
    let deleted = s.ends_with(DELETED) && s[..s.len() - DELETED.len()].ends_with(b">");
    let s = if deleted {
        &s[..s.len() - DELETED.len()]
    } else {
        s
    };
    let (head, deco) = split_deco(s);
    // `-X raw` prints AT_FDCWD as `-100`, `-X verbose` as `-100 /*
    // AT_FDCWD */` (no fd is negative).
    let head = trim(split_comment(head).0);
    let at_fdcwd = head == b"AT_FDCWD" || head == b"-100";
    let fd = if at_fdcwd {
        None
    } else {
        parse_i64(head).map(|v| v as i32)
    };
    FdArg {
        fd,
        at_fdcwd,
        deco,
        deleted,
    }
}

/// Splits `3</a/b>` into (`3`, `/a/b`). With `-yy`, a device decoration
/// (`/dev/null<char 1:3>`) is nested; the outer text is returned whole.
pub(crate) fn split_deco(s: &[u8]) -> (&[u8], Option<&[u8]>) {
    // Short haystacks (`3</a/b>`, `AT_FDCWD`): a plain loop beats
    // memchr's dispatch.
    match s.iter().position(|&c| c == b'<') {
        Some(i) if s.last() == Some(&b'>') && s.len() >= i + 2 => {
            (&s[..i], Some(&s[i + 1..s.len() - 1]))
        }
        _ => (s, None),
    }
}

/// Decodes a `-y` decoration into a path: escapes undone, a nested `-yy`
/// device suffix (`/dev/null<char 1:3>`) dropped. Socket and pipe
/// decorations (`TCP:[...]`, `socket:[...]`, `pipe:[...]`) are kept as text.
pub(crate) fn decode_deco(d: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let d = if d.first() == Some(&b'/') && d.last() == Some(&b'>') {
        match memrchr(b'<', d) {
            Some(i) => &d[..i],
            None => d,
        }
    } else {
        d
    };
    unescape(d, out);
}

/// [`decode_deco`] without the copy when the decoration has no escape.
#[inline(always)]
pub(crate) fn decode_deco_ref<'a>(d: &'a [u8], out: &'a mut Vec<u8>) -> &'a [u8] {
    let e = if d.first() == Some(&b'/') && d.last() == Some(&b'>') {
        memrchr(b'<', d).unwrap_or(d.len())
    } else {
        d.len()
    };
    if find2(&d[..e], b'\\', b'\\').is_none() {
        return &d[..e];
    }
    decode_deco(d, out);
    &out[..]
}

/// Parses a decimal (optionally negative) or `0x` hex integer.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    // Most results and fds are one digit (`= 0`, `3</a/b>`): without the
    // general loops below (42 instructions per call on s30.log's results).
    if let &[c @ b'0'..=b'9'] = s {
        return Some((c - b'0') as i64);
    }
    parse_i64_any(s)
}

/// [`parse_i64`] for every shape.
fn parse_i64_any(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let v = if let Some(h) = digits.strip_prefix(b"0x") {
        if h.is_empty() || h.len() > 16 {
            return None;
        }
        let mut v: u64 = 0;
        for &c in h {
            v = v * 16 + hexval(c)? as u64;
        }
        v as i64
    } else {
        if digits.len() > 19 {
            return None;
        }
        let mut v: i64 = 0;
        for &c in digits {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
        }
        v
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

/// The flag names this crate decodes, with their bit in [`Flags`]. One
/// table for open flags, `*at` flags, access modes and `unlinkat` flags
/// (names from Linux `include/uapi/asm-generic/fcntl.h`, `linux/fcntl.h`
/// and `unistd.h`, as strace prints them).
pub(crate) const FLAG_NAMES: &[(&[u8], u32)] = &[
    (b"AT_SYMLINK_NOFOLLOW", Flags::AT_SYMLINK_NOFOLLOW),
    (b"AT_EMPTY_PATH", Flags::AT_EMPTY_PATH),
    (b"AT_REMOVEDIR", Flags::AT_REMOVEDIR),
    (b"O_WRONLY", Flags::O_WRONLY),
    (b"O_RDWR", Flags::O_RDWR),
    (b"O_CREAT", Flags::O_CREAT),
    (b"O_EXCL", Flags::O_EXCL),
    (b"O_TRUNC", Flags::O_TRUNC),
    (b"O_DIRECTORY", Flags::O_DIRECTORY),
    (b"O_APPEND", Flags::O_APPEND),
    (b"O_NOFOLLOW", Flags::O_NOFOLLOW),
    (b"O_PATH", Flags::O_PATH),
    (b"R_OK", Flags::R_OK),
    (b"W_OK", Flags::W_OK),
    (b"X_OK", Flags::X_OK),
];

/// Whether an fcntl command argument duplicates the fd: `F_DUPFD` or
/// `F_DUPFD_CLOEXEC` (Linux `include/uapi/linux/fcntl.h`, handled by
/// `f_dupfd` in `fs/fcntl.c`); as `-X raw` prints them, 0 and 1030.
pub(crate) fn is_fcntl_dupfd(cmd: &[u8]) -> bool {
    matches!(
        trim(split_comment(cmd).0),
        b"F_DUPFD" | b"F_DUPFD_CLOEXEC" | b"0" | b"0x406" | b"1030"
    )
}

/// `-X verbose`'s value and the comment after it, the names it stands
/// for (`0x241 /* O_WRONLY|O_CREAT|O_TRUNC */` -> `0x241` and
/// `O_WRONLY|O_CREAT|O_TRUNC`); other texts as they are, with no comment.
pub(crate) fn split_comment(s: &[u8]) -> (&[u8], Option<&[u8]>) {
    if let Some(i) = memchr::memmem::find(s, b" /* ") {
        if let Some(names) = s[i + 4..].strip_suffix(b" */") {
            return (&s[..i], Some(names));
        }
    }
    (s, None)
}

/// What a flag argument printed as a number holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlagClass {
    /// `AT_*` flags of the *at calls and statx.
    At,
    /// unlinkat's, where 0x200 is `AT_REMOVEDIR` (elsewhere `AT_EACCESS`).
    AtRemove,
    /// access modes (`R_OK`, `W_OK`, `X_OK`).
    Mode,
    /// open flags (`O_*`).
    Open,
}

/// The [`Flags`] bits of a flag argument strace printed as a number
/// (`-X raw`: `0x100`; `-X verbose`: `0x100 /* AT_SYMLINK_NOFOLLOW */`).
/// The values are Linux's (`include/uapi/linux/fcntl.h`, `unistd.h`); the
/// `O_*` ones are x86-64's (`include/uapi/asm-generic/fcntl.h`; arm64 and
/// powerpc number `O_DIRECTORY` and `O_NOFOLLOW` otherwise, which
/// `-X verbose`'s names would show).
pub(crate) fn numeric_flags(s: &[u8], class: FlagClass) -> u32 {
    let Some(v) = parse_i64(split_comment(s).0).map(|v| v as u64) else {
        return 0;
    };
    let table: &[(u64, u32)] = match class {
        FlagClass::At => &[
            (0x100, Flags::AT_SYMLINK_NOFOLLOW),
            (0x1000, Flags::AT_EMPTY_PATH),
        ],
        FlagClass::AtRemove => &[
            (0x100, Flags::AT_SYMLINK_NOFOLLOW),
            (0x200, Flags::AT_REMOVEDIR),
            (0x1000, Flags::AT_EMPTY_PATH),
        ],
        FlagClass::Mode => &[(4, Flags::R_OK), (2, Flags::W_OK), (1, Flags::X_OK)],
        FlagClass::Open => &[
            (0o1, Flags::O_WRONLY),
            (0o2, Flags::O_RDWR),
            (0o100, Flags::O_CREAT),
            (0o200, Flags::O_EXCL),
            (0o1000, Flags::O_TRUNC),
            (0o2000, Flags::O_APPEND),
            (0o200000, Flags::O_DIRECTORY),
            (0o400000, Flags::O_NOFOLLOW),
            (0o10000000, Flags::O_PATH),
        ],
    };
    table
        .iter()
        .filter(|&&(bit, _)| v & bit != 0)
        .fold(0, |acc, &(_, f)| acc | f)
}

/// Decodes a symbolic flag set (`O_RDONLY|O_CLOEXEC`, `R_OK|X_OK`,
/// `AT_SYMLINK_NOFOLLOW`) into [`Flags`] bits; unknown names and numbers
/// are ignored.
///
/// Each `|` found by [`find2`], each name looked up in [`FLAG_NAMES`] only
/// when it could be one (its length and first byte): the `split` iterator
/// and a table search for every piece took ~150 instructions per call.
#[inline]
pub(crate) fn parse_flags(s: &[u8]) -> u32 {
    // The whole texts most calls pass (s30.log: AT_SYMLINK_NOFOLLOW 48k,
    // AT_EMPTY_PATH 14k, R_OK 10k, F_OK 10k, O_RDONLY 9k, 0), compared
    // whole, before the search for `|`: by their length, then as words
    // (overlapping at the end). A `match` on the byte strings compared
    // them a byte at a time, inside a function that saved six registers
    // for the general steps: 47 instructions a call.
    const NOFOLLOW: &[u8; 19] = b"AT_SYMLINK_NOFOLLOW";
    const EMPTY_PATH: &[u8; 13] = b"AT_EMPTY_PATH";
    const RDONLY_CLOEXEC: &[u8; 18] = b"O_RDONLY|O_CLOEXEC";
    #[inline(always)]
    fn w8(s: &[u8], i: usize) -> u64 {
        u64::from_le_bytes(s[i..i + 8].try_into().unwrap())
    }
    #[inline(always)]
    fn w4(s: &[u8]) -> u32 {
        u32::from_le_bytes(s[..4].try_into().unwrap())
    }
    let n = s.len();
    let same = |t: &[u8]| w8(s, 0) == w8(t, 0) && w8(s, n - 8) == w8(t, n - 8);
    match n {
        19 if same(NOFOLLOW) && w8(s, 8) == w8(NOFOLLOW, 8) => return Flags::AT_SYMLINK_NOFOLLOW,
        13 if same(EMPTY_PATH) => return Flags::AT_EMPTY_PATH,
        4 if w4(s) == w4(b"R_OK") => return Flags::R_OK,
        4 if w4(s) == w4(b"F_OK") => return 0,
        1 if s[0] == b'0' => return 0,
        8 if w8(s, 0) == w8(b"O_RDONLY", 0) => return 0,
        18 if same(RDONLY_CLOEXEC) && w8(s, 8) == w8(RDONLY_CLOEXEC, 8) => return 0,
        _ => {}
    }
    parse_flags_any(s)
}

/// [`parse_flags`] for every text.
#[inline(never)]
fn parse_flags_any(s: &[u8]) -> u32 {
    let mut bits = 0;
    let mut rest = s;
    loop {
        let (piece, next) = match find2(rest, b'|', b'|') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        bits |= flag_bit(trim(piece));
        match next {
            Some(n) => rest = n,
            None => return bits,
        }
    }
}

/// The [`Flags`] bit of one flag name, 0 if it has none.
#[inline]
fn flag_bit(name: &[u8]) -> u32 {
    // Every kept name is 4 to 19 bytes long and starts with one of these.
    if !(4..=19).contains(&name.len()) || !matches!(name[0], b'A' | b'O' | b'R' | b'W' | b'X') {
        return 0;
    }
    for &(n, b) in FLAG_NAMES {
        if n == name {
            return b;
        }
    }
    0
}

/// Parses strace's `-T` duration text (`0.000016`) into microseconds.
pub(crate) fn parse_secs_us(s: &[u8]) -> Option<u64> {
    // strace prints `-T` as `S.uuuuuu` (one integer digit for any call
    // under ten seconds): read by position, without the loops below (the
    // loops took 5% of the one-thread parser's instructions).
    //
    // The 8 bytes are one word (then 61 instructions per call, now ~25):
    // the dot is made a `0`, all 8 bytes checked to be digits at once, and
    // read as the 8-digit number `a0uuuuuu` = a * 10^7 + u, from which
    // a * 9 * 10^6 is taken.
    const DIGIT_HI: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    if let Ok(b) = <[u8; 8]>::try_from(s) {
        let w = u64::from_le_bytes(b);
        if (w >> 8) as u8 == b'.' {
            let w = w ^ (((b'.' ^ b'0') as u64) << 8);
            // Each byte 0x30..=0x3f, and still under 0x40 after adding 6
            // (a byte's low nibble plus 6 carries only into its own high
            // nibble): each byte 0x30..=0x39.
            if w & DIGIT_HI != ZEROS || w.wrapping_add(0x0606_0606_0606_0606) & DIGIT_HI != ZEROS {
                return None;
            }
            // First byte the most significant digit: pairs, then fours,
            // then the eight.
            let a = (w as u8 - b'0') as u64;
            let v = w - ZEROS;
            let v = (v * 10 + (v >> 8)) & 0x00ff_00ff_00ff_00ff;
            let v = (v * 100 + (v >> 16)) & 0x0000_ffff_0000_ffff;
            let v = (v * 10000 + (v >> 32)) & 0xffff_ffff;
            return Some(v - a * 9_000_000);
        }
    }
    secs_us_any(s)
}

/// [`parse_secs_us`] for every shape.
fn secs_us_any(s: &[u8]) -> Option<u64> {
    // One pass over the integer digits (no search for the dot first).
    let mut v: u64 = 0;
    let mut i = 0;
    while let Some(&c @ b'0'..=b'9') = s.get(i) {
        v = v.wrapping_mul(10).wrapping_add((c - b'0') as u64);
        i += 1;
    }
    if i == 0 || i > 12 || s.get(i) != Some(&b'.') || i + 1 == s.len() {
        return None;
    }
    Some(v * 1_000_000 + frac_us(&s[i + 1..])? as u64)
}

/// Fractional-second digits (any count) to microseconds, truncating below.
pub(crate) fn frac_us(frac: &[u8]) -> Option<i64> {
    let mut us: i64 = 0;
    for (k, &c) in frac.iter().enumerate() {
        if !c.is_ascii_digit() {
            return None;
        }
        if k < 6 {
            us = us * 10 + (c - b'0') as i64;
        }
    }
    for _ in frac.len()..6 {
        us *= 10;
    }
    Some(us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::xorshift;

    /// `trim` against its general steps on every text of up to six bytes
    /// over blank, tab, CR, a letter and a comma (each fast exit and each
    /// loop).
    #[test]
    fn trim_equals_its_general_steps() {
        let alphabet = [b' ', b'\t', b'\r', b'a', b','];
        let mut n = 0;
        for len in 0..=6u32 {
            for code in 0..alphabet.len().pow(len) {
                let mut c = code;
                let t: Vec<u8> = (0..len)
                    .map(|_| {
                        let b = alphabet[c % alphabet.len()];
                        c /= alphabet.len();
                        b
                    })
                    .collect();
                assert_eq!(trim(&t), trim_any(&t), "{:?}", String::from_utf8_lossy(&t));
                n += 1;
            }
        }
        assert_eq!(n, 19_531);
    }

    #[test]
    fn positional_duration_equals_the_loop() {
        // Every 8-byte text over digits, '.', and two other bytes, sampled
        // (a fixed xorshift sequence): the `S.uuuuuu` shortcut and the
        // general loop agree, including on what they refuse.
        let alphabet = b"0123456789.x-";
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200_000 {
            let mut t = [0u8; 8];
            let mut x = 0;
            for b in t.iter_mut() {
                x = next();
                *b = alphabet[(x % alphabet.len() as u64) as usize];
            }
            // Most samples should take the shortcut's shape.
            if x % 4 != 0 {
                t[1] = b'.';
            }
            assert_eq!(parse_secs_us(&t), secs_us_any(&t), "{t:?}");
        }
    }

    #[test]
    fn word_duration_equals_the_loop_for_every_byte() {
        // Every byte value at every position of a few valid durations
        // (bytes just past '9' and just below '0' included), and every
        // digit at every position.
        for base in [b"0.000016", b"9.999999", b"7.123456", b"0.000000"] {
            for k in 0..8 {
                for v in 0..=255u8 {
                    let mut t = *base;
                    t[k] = v;
                    assert_eq!(parse_secs_us(&t), secs_us_any(&t), "{t:?}");
                }
            }
        }
    }

    #[test]
    fn one_digit_i64_equals_the_loop() {
        // Every text of one or two bytes, and three-byte ones around the
        // digits, signs and `0x`.
        for a in 0..=255u8 {
            assert_eq!(parse_i64(&[a]), parse_i64_any(&[a]), "{a}");
            for b in 0..=255u8 {
                assert_eq!(parse_i64(&[a, b]), parse_i64_any(&[a, b]), "{a} {b}");
            }
        }
        for t in [&b"-1"[..], b"0x1", b"-0", b"", b"12", b"007", b"9"] {
            assert_eq!(parse_i64(t), parse_i64_any(t), "{t:?}");
        }
    }

    #[test]
    fn fd_of_an_unlinked_file() {
        // strace 6.1: `fcntl(3</tmp/dlx>(deleted), F_DUPFD, 10)`
        let f = parse_fd(b"3</tmp/dlx>(deleted)");
        assert_eq!(
            (f.fd, f.deco, f.deleted),
            (Some(3), Some(&b"/tmp/dlx"[..]), true)
        );
        let f = parse_fd(b"3</tmp/dlx>");
        assert_eq!(
            (f.fd, f.deco, f.deleted),
            (Some(3), Some(&b"/tmp/dlx"[..]), false)
        );
        // a path that itself ends in "(deleted)" is not the mark
        let f = parse_fd(b"3</tmp/x(deleted)>");
        assert_eq!(
            (f.fd, f.deco, f.deleted),
            (Some(3), Some(&b"/tmp/x(deleted)"[..]), false)
        );
        let f = parse_fd(b"AT_FDCWD");
        assert!(f.at_fdcwd && !f.deleted);
    }

    #[test]
    fn special_scan_agrees_with_the_table() {
        // every byte value at every position of a 16-byte window, and
        // windows of every length and start around it
        for v in 0..=255u8 {
            for k in 0..40 {
                let mut s = vec![b'a'; 40];
                s[k] = v;
                for i in 0..40 {
                    let want = (i..40).find(|&j| CALL_SPECIAL[s[j] as usize]).unwrap_or(40);
                    assert_eq!(
                        next_call_special(&s, i),
                        want,
                        "byte {v:#x} at {k}, from {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn decorations_end_at_their_own_close() {
        let cases: &[(&[u8], Option<usize>)] = &[
            (b"</srv/a, b (old)/x.php>, \"x\")", Some(23)),
            // A path ending in `-`; `<>` in it escaped by strace.
            (b"</tmp/q\\\"q \\74a\\76 ->, 0)", Some(21)),
            (b"</dev/null<char 1:3>>, 1)", Some(21)),
            (b"<TCP:[127.0.0.1:9000->127.0.0.1:40312]>, x)", Some(39)),
            (b"<TCPv6:[[::1]:80->[::1]:9]>)", Some(27)),
            (b"<UNIX-STREAM:[1234,\"/run/php/fpm.sock\"]>)", Some(40)),
            (b"<php-fpm8.2>, SIGTERM)", Some(12)),
            (b"<unavailable>, 8)", Some(13)),
            (b"< 3)", None),
            (b"</a, 3)", None),
        ];
        for &(t, want) in cases {
            assert_eq!(deco_end(t, 0), want, "{}", String::from_utf8_lossy(t));
        }
        // The scan takes a decoration as part of one argument.
        let t = br#"AT_FDCWD</tmp/a,b (x [y>, "f", {st_mode=S_IFREG|0644, ...}, 0) = 0"#;
        let mut a = ArgList::default();
        let close = scan_call(t, &mut a).unwrap();
        assert_eq!(&t[close..], b") = 0");
        assert_eq!(a.n, 4);
        assert_eq!(a.get(t, 0), Some(&b"AT_FDCWD</tmp/a,b (x [y>"[..]));
        assert_eq!(a.get(t, 1), Some(&b"\"f\""[..]));
        let mut b = ArgList::default();
        split_args(&t[..close], &mut b, MAX_ARGS);
        assert_eq!(a.spans[..a.n], b.spans[..b.n]);
    }

    #[test]
    fn close_paren_skips_strings_and_nested() {
        let s = br#"3, "a)b\")", [{WIFEXITED(s)}]) = 0"#;
        let i = find_close_paren(s).unwrap();
        assert_eq!(&s[i..], b") = 0");
    }

    #[test]
    fn split_and_decode() {
        let s =
            br#"AT_FDCWD, "/a,b\x41\101\"\n", {st_mode=S_IFREG, st_size=1}, AT_SYMLINK_NOFOLLOW"#;
        let mut a = ArgList::default();
        split_args(s, &mut a, MAX_ARGS);
        assert_eq!(a.n, 4);
        let mut out = Vec::new();
        assert_eq!(decode_string(a.get(s, 1).unwrap(), &mut out), Some(false));
        assert_eq!(out, b"/a,bAA\"\n");
        assert_eq!(
            parse_flags(a.get(s, 3).unwrap()),
            Flags::AT_SYMLINK_NOFOLLOW
        );
        assert_eq!(decode_string(br#""abc"..."#, &mut out), Some(true));
        assert_eq!(out, b"abc");
    }

    #[test]
    fn scan_call_agrees_with_the_two_passes() {
        let cases: &[&[u8]] = &[
            br#"AT_FDCWD</srv/www/site28>, "/lib/x86_64-linux-gnu/libz.so.1", {st_mode=S_IFREG|0644, st_size=121280, ...}, AT_SYMLINK_NOFOLLOW) = 0 <0.000014>"#,
            br#"3, "a)b\")", [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 3"#,
            br#"5, {sa_family=AF_INET, sin_port=htons(50692), sin_addr=inet_addr("127.0.0.1")}, [112 => 16]) = 3<TCP:[127.0.0.1:9000->127.0.0.1:30021]>"#,
            b") = 0",
            b"a,) = 0",
            b",,) = 0",
            br#""unclosed) = 0"#,
            b"(((a) = 0",
            b"1, 2, 3, 4, 5, 6, 7, 8, 9, 10) = 0",
            br#""abc"..., 832) = 832"#,
        ];
        for &c in cases {
            let mut a = ArgList::default();
            let mut b = ArgList::default();
            let close = find_close_paren(c);
            assert_eq!(
                scan_call(c, &mut a),
                close,
                "{}",
                String::from_utf8_lossy(c)
            );
            if let Some(close) = close {
                split_args(&c[..close], &mut b, MAX_ARGS);
                assert_eq!(a.n, b.n, "{}", String::from_utf8_lossy(c));
                assert_eq!(a.spans[..a.n], b.spans[..b.n]);
            }
        }
    }

    #[test]
    fn scan_call_equals_the_bytewise_scan() {
        // Random texts over the bytes the scan acts on and a few others,
        // 0 to 300 bytes (several 64-byte windows, tails of every length),
        // from a fixed xorshift sequence.
        // Dense (a special byte in most places) and sparse (mostly plain
        // bytes, so scans cross 64-byte windows inside and outside strings).
        let dense: &[u8] = b"\"\\(),[]{}ab 0<>/-";
        let sparse: &[u8] = b"\"\\(),[]{}aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let mut next = xorshift(0x243f_6a88_85a3_08d3);
        for round in 0..200_000 {
            let alphabet = if round % 2 == 0 { dense } else { sparse };
            let len = (next() % 300) as usize;
            let t: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let (mut a, mut b) = (ArgList::default(), ArgList::default());
            let rb = scan_call_bytewise(&t, &mut b);
            // The dispatching scan (AVX2 where the CPU has it) and the
            // baseline one.
            for ra in [
                scan_call(&t, &mut a),
                scan_call_with(&t, &mut a, masks_upto64),
            ] {
                assert_eq!(ra, rb, "{}", String::from_utf8_lossy(&t));
                if ra.is_some() {
                    assert_eq!(a.spans[..a.n], b.spans[..b.n]);
                }
            }
        }
    }

    /// The masks by their definition, a byte at a time.
    fn masks_bytewise(s: &[u8]) -> (u64, u64, u64, u64) {
        let (mut spec, mut qb, mut comma, mut gt) = (0u64, 0u64, 0u64, 0u64);
        for (k, &c) in s.iter().take(64).enumerate() {
            spec |= (CALL_SPECIAL[c as usize] as u64) << k;
            qb |= ((c == b'"' || c == b'\\') as u64) << k;
            comma |= ((c == b',') as u64) << k;
            gt |= ((c == b'>') as u64) << k;
        }
        (spec, qb, comma, gt)
    }

    /// Every length from 0 to 100 (whole pieces, tails read from the last
    /// piece, tails of texts shorter than a piece) and byte value.
    #[test]
    fn masks_equal_their_definition() {
        let mut next = xorshift(0x4528_21e6_38d0_1377);
        for round in 0..50_000 {
            let x = next();
            let len = round % 101;
            let s: Vec<u8> = (0..len)
                .map(|i| x.rotate_left(i as u32 * 11) as u8 ^ (i as u8).wrapping_mul(37))
                .collect();
            assert_eq!(masks_upto64(&s), masks_bytewise(&s), "{s:?}");
        }
    }

    /// The AVX2 masks are the SSE2 ones, for every length and byte.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_masks_equal_the_sse2_ones() {
        if !std::is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 on this CPU: the AVX2 masks are not used here");
            return;
        }
        let mut next = xorshift(0x1319_8a2e_0370_7344);
        for _ in 0..100_000 {
            let x = next();
            let len = (x % 100) as usize;
            let s: Vec<u8> = (0..len)
                .map(|i| x.rotate_left(i as u32 * 7) as u8 ^ (i as u8).wrapping_mul(151))
                .collect();
            // SAFETY: the CPU has AVX2 (checked above).
            let avx = unsafe { masks_upto64_avx2(&s) };
            assert_eq!(avx, masks_upto64(&s), "{s:?}");
            assert_eq!(avx, masks_bytewise(&s), "{s:?}");
        }
    }

    #[test]
    fn flag_sets_decode_to_their_bits() {
        let f = |s: &str| parse_flags(s.as_bytes());
        assert_eq!(f("0"), 0);
        assert_eq!(f("O_RDONLY|O_CLOEXEC"), 0);
        assert_eq!(
            f("O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC"),
            Flags::O_WRONLY | Flags::O_CREAT | Flags::O_TRUNC
        );
        assert_eq!(
            f("O_RDWR|O_EXCL|O_DIRECTORY|O_APPEND|O_NOFOLLOW|O_PATH"),
            Flags::O_RDWR
                | Flags::O_EXCL
                | Flags::O_DIRECTORY
                | Flags::O_APPEND
                | Flags::O_NOFOLLOW
                | Flags::O_PATH
        );
        assert_eq!(
            f("AT_SYMLINK_NOFOLLOW| AT_EMPTY_PATH |AT_REMOVEDIR"),
            Flags::AT_SYMLINK_NOFOLLOW | Flags::AT_EMPTY_PATH | Flags::AT_REMOVEDIR
        );
        assert_eq!(f("R_OK|W_OK|X_OK"), Flags::R_OK | Flags::W_OK | Flags::X_OK);
        // Unknown names, numbers, prefixes and near misses add nothing.
        assert_eq!(f("0x80000|AT_SYMLINK|O_CREATE|r_ok|F_OK"), 0);
    }

    #[test]
    fn find2_equals_the_plain_search() {
        // Every length from 0 to 80 (the 8- and 16-byte steps, their
        // overlapping last pieces, the zero-padded short texts), the
        // searched bytes (zero among them: the padding must not match)
        // at random places, both searches.
        let mut next = xorshift(0x4528_21e6_38d0_1377);
        for round in 0..300_000 {
            let len = round % 81;
            let (a, b) = match round % 4 {
                0 => (b'"', b'\\'),
                1 => (b'|', b'|'),
                2 => (0, b'<'),
                _ => (b'\\', b'\\'),
            };
            let r = next();
            // From none to several matches.
            let density = 1 + r % 97;
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    let x = next();
                    match x % density {
                        0 => a,
                        1 => b,
                        _ => [b'x', 0, b'/', 0xff][(x >> 32) as usize % 4],
                    }
                })
                .collect();
            let want = s.iter().position(|&c| c == a || c == b);
            assert_eq!(find2(&s, a, b), want, "{s:?} {a} {b}");
            assert_eq!(find2_swar(&s, a, b), want, "{s:?} {a} {b}");
        }
    }

    #[test]
    fn load_upto16_is_the_zero_padded_text() {
        for n in 0..=16usize {
            let s: Vec<u8> = (0..n as u8).map(|i| 0xa0 + i).collect();
            let mut k = [0u8; 16];
            k[..n].copy_from_slice(&s);
            assert_eq!(load_upto16(&s), u128::from_le_bytes(k), "length {n}");
        }
    }

    #[test]
    fn deco_ref_equals_the_copy() {
        // Decorations with and without escapes, nested `-yy` suffixes,
        // stray brackets, of every length up to 70.
        let mut next = xorshift(0xbe54_66cf_34e9_0c6c);
        let alphabet = b"/ab<>\\x1 :[]";
        for round in 0..200_000 {
            let len = round % 71;
            let mut d: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            if round % 3 == 0 && !d.is_empty() {
                d[0] = b'/';
            }
            let (mut o1, mut o2) = (Vec::new(), Vec::new());
            decode_deco(&d, &mut o1);
            assert_eq!(decode_deco_ref(&d, &mut o2), &o1[..], "{d:?}");
        }
    }

    /// [`parse_flags`] as it was: every piece of a `split`, trimmed, looked
    /// up in the whole table.
    fn parse_flags_split(s: &[u8]) -> u32 {
        let mut bits = 0;
        for name in s.split(|&c| c == b'|') {
            let name = trim(name);
            for &(n, b) in FLAG_NAMES {
                if n == name {
                    bits |= b;
                    break;
                }
            }
        }
        bits
    }

    #[test]
    fn parse_flags_equals_the_split_lookup() {
        // Sets of kept names, other names, their prefixes and extensions,
        // numbers, blanks, tabs, carriage returns and empty pieces.
        let words: Vec<&[u8]> = FLAG_NAMES
            .iter()
            .map(|&(n, _)| n)
            .chain([
                &b"O_RDONLY"[..],
                b"O_CLOEXEC",
                b"0",
                b"0x80000",
                b"",
                b"AT_SYMLINK_NOFOLLOWX",
                b"O_PAT",
                b"XR_OK",
                b"F_OK",
                b"resolve=RESOLVE_NO_SYMLINKS",
            ])
            .collect();
        // The whole texts parse_flags answers first, their neighbours.
        for t in [
            &b"AT_SYMLINK_NOFOLLOW"[..],
            b"AT_EMPTY_PATH",
            b"R_OK",
            b"F_OK",
            b"0",
            b"O_RDONLY",
            b"O_RDONLY|O_CLOEXEC",
            b"O_RDONLY|O_CREAT",
            b"AT_EMPTY_PATH|AT_SYMLINK_NOFOLLOW",
            b"R_OK ",
            b" W_OK",
        ] {
            assert_eq!(
                parse_flags(t),
                parse_flags_split(t),
                "{}",
                String::from_utf8_lossy(t)
            );
            // The same length with any one byte changed (the whole texts
            // are compared as words).
            for i in 0..t.len() {
                for c in [b'X', b'_', b'|', b' ', 0] {
                    let mut u = t.to_vec();
                    u[i] = c;
                    assert_eq!(
                        parse_flags(&u),
                        parse_flags_split(&u),
                        "{}",
                        String::from_utf8_lossy(&u)
                    );
                }
            }
        }
        let seps: [&[u8]; 6] = [b"|", b"|", b" |", b"| ", b"\t|\r", b"||"];
        let ends: [&[u8]; 5] = [b"", b"", b" ", b"\t", b"\r"];
        let mut next = xorshift(0x3c6e_f372_fe94_f82b);
        for _ in 0..200_000 {
            let mut s = Vec::new();
            s.extend_from_slice(ends[(next() % 5) as usize]);
            for k in 0..1 + next() % 5 {
                if k > 0 {
                    s.extend_from_slice(seps[(next() % 6) as usize]);
                }
                s.extend_from_slice(words[(next() % words.len() as u64) as usize]);
            }
            s.extend_from_slice(ends[(next() % 5) as usize]);
            assert_eq!(
                parse_flags(&s),
                parse_flags_split(&s),
                "{}",
                String::from_utf8_lossy(&s)
            );
        }
    }

    #[test]
    fn quote_or_backslash_equals_memchr2() {
        let mut next = xorshift(0xa409_3822_299f_31d0);
        for _ in 0..100_000 {
            let x = next();
            let len = (x % 80) as usize;
            let s: Vec<u8> = (0..len)
                .map(|i| match (x >> (i % 60)) % 40 {
                    0 => b'"',
                    1 => b'\\',
                    2 => 0,
                    k => b'a' + k as u8,
                })
                .collect();
            assert_eq!(quote_or_backslash(&s), memchr2(b'"', b'\\', &s), "{s:?}");
        }
    }

    #[test]
    fn fd_fast_shapes_equal_the_general_steps() {
        // Texts built from the pieces of fd arguments (digits, AT_FDCWD and
        // near misses, brackets, `(deleted)`, blanks), 0 to 8 pieces.
        let pieces: [&[u8]; 16] = [
            b"3",
            b"10",
            b"-1",
            b"<",
            b">",
            b"/a/b",
            b"AT_FDCWD",
            b"AT_FDCWd",
            b"AT_FDCW",
            b"(deleted)",
            b" ",
            b"x",
            b"TCP:[1->2]",
            b"<char 1:3>",
            b"0x1",
            b"",
        ];
        let mut next = xorshift(0x5eed_f00d_1234_5678);
        let key = |f: FdArg<'_>| (f.fd, f.at_fdcwd, f.deco.map(|d| d.to_vec()), f.deleted);
        for _ in 0..300_000 {
            let r = next();
            let mut t = Vec::new();
            for k in 0..(r % 9) {
                t.extend_from_slice(pieces[((r >> (4 + 4 * k)) % 16) as usize]);
            }
            assert_eq!(
                key(parse_fd(&t)),
                key(parse_fd_any(&t)),
                "{}",
                String::from_utf8_lossy(&t)
            );
        }
    }

    #[test]
    fn exec_argv_strings() {
        let f = |s: &str| {
            let mut out = Vec::new();
            exec_argv(s.as_bytes(), &mut out).then(|| String::from_utf8(out).unwrap())
        };
        assert_eq!(
            f(r#"["php", "-d", "open_basedir=/srv:/tmp", "/srv/index.php"]"#).as_deref(),
            Some("php\0-d\0open_basedir=/srv:/tmp\0/srv/index.php\0")
        );
        assert_eq!(f(r#"["php", "k=a\"b"]"#).as_deref(), Some("php\0k=a\"b\0"));
        assert_eq!(
            f(r#"["php", "-d", "a=1"..., ...]"#).as_deref(),
            Some("php\0-d\0")
        );
        assert_eq!(f(r#"["php", "-d", ...]"#).as_deref(), Some("php\0-d\0"));
        assert_eq!(f("[]").as_deref(), Some(""));
        assert_eq!(f("0x7ffd46b35860"), None);
        assert_eq!(f(r#"["unterminated"#).as_deref(), Some(""));
    }

    #[test]
    fn fd_decorations() {
        let f = parse_fd(b"3</a/b>");
        assert_eq!((f.fd, f.deco), (Some(3), Some(&b"/a/b"[..])));
        let f = parse_fd(b"AT_FDCWD");
        assert!(f.at_fdcwd && f.fd.is_none());
        let mut out = Vec::new();
        decode_deco(b"/dev/null<char 1:3>", &mut out);
        assert_eq!(out, b"/dev/null");
        for d in [
            &b"/dev/null<char 1:3>"[..],
            b"/a\\x62c",
            b"TCP:[1->2]",
            b"/p<x>y>",
        ] {
            let mut o2 = Vec::new();
            decode_deco(d, &mut out);
            assert_eq!(decode_deco_ref(d, &mut o2), &out[..]);
        }
        for s in [
            &br#""abc"..."#[..],
            br#""a\"b""#,
            br#""a\x62""#,
            b"\"",
            b"x",
            b"\"abc",
        ] {
            let mut o2 = Vec::new();
            let a = decode_string(s, &mut out).map(|t| (out.clone(), t));
            let b = decode_string_ref(s, &mut o2).map(|(v, t)| (v.to_vec(), t));
            assert_eq!(a, b, "{}", String::from_utf8_lossy(s));
        }
        assert_eq!(parse_i64(b"0x7f4bec616000"), Some(0x7f4bec616000));
        assert_eq!(parse_secs_us(b"0.000016"), Some(16));
        assert_eq!(parse_secs_us(b"7.123456"), Some(7_123_456));
        assert_eq!(parse_secs_us(b"1.5"), Some(1_500_000));
        assert_eq!(parse_secs_us(b"12.0000167"), Some(12_000_016));
        for bad in [
            &b""[..],
            b".5",
            b"1.",
            b"1",
            b"a.5",
            b"1.5x",
            b"1x.5",
            b"1234567890123.0",
        ] {
            assert_eq!(parse_secs_us(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
