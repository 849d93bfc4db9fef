//! coolant's success fast path (docs/engine-fast-path.md, FP2): the native backend of `coolant.native_backend`.
//!
//! A narrow primitive. `FastPath.scan` reads a block of JSONL lines and *owns* only the plain successes of
//! deployments it was handed (`push`) with nothing pending: it checks them late (L1) and duplicate (L2, on
//! 64-bit hashes of the event id), advances the high-water mark, and tallies them into per-deployment counters
//! (the O5 window, the publisher's D7 success counter, LC2). Every other line is handed back to Python, in
//! file order, and Python's engine decides it: failures, probes, pre-call checks, non-final attempts, late and
//! duplicate records, a record due for L3, lines it cannot read exactly as msgspec would. The scan stops at
//! each such line; `pull` writes that deployment's counters back into its Python `PathState` before the engine
//! sees the record, and `push` takes the deployment back after it when nothing is pending. A deployment Python
//! has no state for is held from its first plain success on, from a fresh state's values (`is_new`, `new_ids`,
//! `take_met`).

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

const TS_MAX: f64 = 10_000_000_000.0; // B2
const LATENCY_MAX: f64 = 1e15; // B3
const INT_MAX: i64 = 2_147_483_647; // B4
const EVENT_ID_MAX: usize = 128;
const LINE_MAX: usize = 1 << 16; // longer lines (B1 allows 1 MB) go to Python

/// The key is already a 64-bit hash: use it as it is.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One deployment's seen ids: hash -> ts, and the hashes in insertion order, so that L3 forgets them as
/// `windows.discard` forgets a dict's (from the oldest inserted, up to the first one still live).
#[derive(Default)]
struct Seen {
    ts: HashMap<u64, f64, BuildHasherDefault<IdHasher>>,
    order: std::collections::VecDeque<u64>,
}

impl Seen {
    #[inline]
    fn contains(&self, h: u64) -> bool {
        self.ts.contains_key(&h)
    }
    #[inline]
    fn insert(&mut self, h: u64, t: f64) {
        if self.ts.insert(h, t).is_none() {
            self.order.push_back(h);
        }
    }
    fn forget_before(&mut self, horizon: f64) {
        while let Some(&h) = self.order.front() {
            match self.ts.get(&h) {
                Some(&t) if t >= horizon => break,
                Some(_) => {
                    self.ts.remove(&h);
                }
                None => {} // deleted by hand
            }
            self.order.pop_front();
        }
    }
}

/// The hash of deployment and event ids: SipHash-1-3 (std's `RandomState`) under a key drawn once per
/// `FastPath`. Keyed, so that no input file can be crafted to collide ids (a seen id's hash is its identity, L2)
/// or to pile entries onto one probe run (the table is linear probing); the key changes positions only, never a
/// result, except for a 64-bit collision, about one in 10^19 pairs.
#[derive(Clone)]
struct IdHash(std::collections::hash_map::RandomState);

impl IdHash {
    #[inline]
    fn of(&self, bytes: &[u8]) -> u64 {
        let mut h = self.0.build_hasher();
        h.write(bytes);
        h.finish()
    }
}

/// Python's `ts // width` for 0 <= ts < 2^53 and a whole `width` > 0 (a slot width, or 60). Python computes it
/// from the exact `fmod` (Objects/floatobject.c, float_floor_div); with such operands `ts - fmod(ts, width)` is
/// the exact multiple `q * width` and the result is q, the exact floor of the quotient. The rounded quotient's
/// floor is q or, when the division rounded up onto the next whole number, q + 1: the exact product tells.
fn floordiv(ts: f64, width: f64) -> f64 {
    let q = (ts / width).floor();
    if q * width > ts {
        q - 1.0
    } else {
        q
    }
}

/// O5: `windows.slot`, `int(ts // width)`.
fn slot(ts: f64, width: f64) -> i64 {
    floordiv(ts, width) as i64
}

/// The longest a held deployment's window tallies may grow before its next L3 is left to the engine.
const MAX_SLOTS: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Python's `PathState` is the state: every line goes to Python.
    Python,
    /// Native counters hold the state's hot part; Python's is stale until `pull`.
    Owned,
}

/// A publisher's success counter (D7) as this side tallies it; `gw` indexes `FastPath::gateways`.
#[derive(Clone, Copy)]
struct Pod {
    s_anchor: f64,
    s_count: i64,
    /// tallied since the deployment was pushed: `pull` writes only these back (the others are Python's as read)
    dirty: bool,
}

/// Deployment ids up to this long are kept inside `Dep` (the table probe then touches no other memory).
const KEY_INLINE: usize = 24;

/// One deployment, laid out so that a tally touches few cache lines: the counters first, the slot being
/// filled inline, then the key, and the rest behind pointers.
struct Dep {
    hw: f64,
    gc_next: f64,
    /// The slot most recently started and its successes since the last pull (`cur_n == 0`: none).
    cur_slot: i64,
    cur_n: i64,
    counted: i64,
    /// The high-water mark of the last L3 this side ran on the seen ids (-inf: none since the last pull): the
    /// engine runs the rest of that L3 (`windows.discard` at that mark) when it pulls the deployment.
    owed: f64,
    mode: Mode,
    /// Python has no state for this deployment yet: this side met it first (a plain success) and has held it
    /// since, from a fresh `PathState`'s values.
    new: bool,
    /// Pulled from this side, and Python has stepped at most the one record it was pulled for: `push` then
    /// reads back only what that step can change.
    fresh: bool,
    key_len: u8,
    key_inline: [u8; KEY_INLINE],
    /// (slot, successes tallied since the last pull) of the other slots, in the order they were started
    windows: Vec<(i64, i64)>,
    /// the publishers' gateways (`FastPath::gateways` indexes) and their counters, in the same order
    pod_gw: Vec<u32>,
    pods: Vec<Pod>,
    seen: Seen,
    key_heap: Vec<u8>,
}

impl Dep {
    fn new(key: &[u8]) -> Self {
        let mut d = Dep {
            hw: f64::NEG_INFINITY,
            gc_next: f64::NEG_INFINITY,
            cur_slot: 0,
            cur_n: 0,
            counted: 0,
            owed: f64::NEG_INFINITY,
            mode: Mode::Python,
            new: false,
            fresh: false,
            key_len: 0,
            key_inline: [0; KEY_INLINE],
            windows: Vec::new(),
            pod_gw: Vec::new(),
            pods: Vec::new(),
            seen: Seen::default(),
            key_heap: Vec::new(),
        };
        if key.len() <= KEY_INLINE {
            d.key_len = key.len() as u8;
            d.key_inline[..key.len()].copy_from_slice(key);
        } else {
            d.key_len = u8::MAX;
            d.key_heap = key.to_vec();
        }
        d
    }

    #[inline]
    fn key(&self) -> &[u8] {
        if self.key_len == u8::MAX {
            &self.key_heap
        } else {
            &self.key_inline[..self.key_len as usize]
        }
    }

    /// Distinct slots tallied since the last pull.
    #[inline]
    fn slots(&self) -> usize {
        self.windows.len() + (self.cur_n != 0) as usize
    }

    /// O5: one success into slot `k`.
    #[inline]
    fn tally_slot(&mut self, k: i64) {
        if self.cur_n != 0 && self.cur_slot == k {
            self.cur_n += 1;
        } else if let Some(w) = self.windows.iter_mut().rev().find(|w| w.0 == k) {
            w.1 += 1;
        } else {
            if self.cur_n != 0 {
                self.windows.push((self.cur_slot, self.cur_n));
            }
            self.cur_slot = k;
            self.cur_n = 1;
        }
    }
}

/// Deployment ids -> `deps` index: open addressing (linear probing) over (index + 1, top bits of the hash).
struct Index {
    slots: Vec<(u32, u32)>,
    len: usize,
    hash: IdHash,
}

impl Index {
    fn new() -> Self {
        Index { slots: vec![(0, 0); 1024], len: 0, hash: IdHash(Default::default()) }
    }

    #[inline]
    fn get(&self, deps: &[Dep], key: &[u8], h: u64) -> Option<u32> {
        self.probe(h, |d| deps[d as usize].key() == key)
    }

    /// The first entry whose hash bits match `h`'s, its key not compared (that would load the entry): a guess
    /// to prefetch, checked when the line is tallied.
    #[inline]
    fn guess(&self, h: u64) -> Option<u32> {
        self.probe(h, |_| true)
    }

    /// Linear probing from `h`'s slot: the first entry whose hash bits match and that `is_it` accepts.
    #[inline]
    fn probe(&self, h: u64, is_it: impl Fn(u32) -> bool) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let tag = (h >> 32) as u32;
        let mut i = h as usize & mask;
        loop {
            let (d, t) = self.slots[i];
            if d == 0 {
                return None;
            }
            if t == tag && is_it(d - 1) {
                return Some(d - 1);
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, deps: &[Dep], h: u64, dep: u32) {
        if (self.len + 1) * 2 > self.slots.len() {
            let bigger = vec![(0, 0); self.slots.len() * 2];
            let old = std::mem::replace(&mut self.slots, bigger);
            self.len = 0;
            for (d, _) in old.into_iter().filter(|s| s.0 != 0) {
                self.insert(deps, self.hash.of(deps[(d - 1) as usize].key()), d - 1);
            }
        }
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        while self.slots[i].0 != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (dep + 1, (h >> 32) as u32);
        self.len += 1;
    }
}

/// One flat JSON object, read as far as the fast path needs it. Strings are raw (no escapes).
#[derive(Default)]
struct Line<'a> {
    schema: Option<&'a [u8]>,
    event_id: Option<&'a [u8]>,
    ts: Option<f64>,
    deployment_id: Option<&'a [u8]>,
    model_group: bool,
    ok: Option<bool>,
    gateway: Option<&'a [u8]>,
    /// a field that is present and makes the record Python's (or a value msgspec might read otherwise)
    python: bool,
    seen_keys: u32,
}

enum Read<'a> {
    /// Not a plain success, or not surely read as msgspec reads it: Python's. `distinct`: the line is one flat
    /// object read to its end and no name in it is given twice, so B11 needs no second look in Python.
    Python { distinct: bool },
    Success(Line<'a>),
}

/// A line this reader gives up on before its end: Python reads it all.
const UNREAD: Read<'static> = Read::Python { distinct: false };

/// Names no record has, kept to compare (B11): more than this many in one line and the line is Python's.
const UNKNOWN_MAX: usize = 8;

#[derive(Clone, Copy)]
enum Value<'a> {
    Str(&'a [u8]),
    Num(&'a [u8], bool), // token, integral (no fraction or exponent)
    True,
    False,
    Null,
}

#[inline]
fn ws(b: u8) -> bool {
    b == b' ' || b == b'\t' || b == b'\r' || b == b'\n'
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
    /// The line holds no backslash and no byte below 0x20: a string then ends at the next quote (`string`).
    simple: bool,
}

/// (simple, ascii): no backslash and no control byte (tab and CR included) in `s`; no byte above 0x7f (then it
/// is valid UTF-8 without a check). One pass with no early exit, which the compiler vectorizes.
#[inline]
fn classify(s: &[u8]) -> (bool, bool) {
    let (escape, high) =
        s.iter().fold((false, false), |(e, h), &b| (e | (b == b'\\') | (b < 0x20), h | (b >= 0x80)));
    (!escape, !high)
}

/// The index of the first `"` in `s`, eight bytes at a time (the lowest zero byte of `word ^ 0x22..` is exact).
#[inline]
fn find_quote(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut i = 0;
    while i + 8 <= s.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&s[i..i + 8]);
        let x = u64::from_le_bytes(word) ^ (ONES * u64::from(b'"'));
        let zero = x.wrapping_sub(ONES) & !x & (ONES << 7);
        if zero != 0 {
            return Some(i + (zero.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    s[i..].iter().position(|&b| b == b'"').map(|n| i + n)
}

impl<'a> Cursor<'a> {
    #[inline]
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && ws(self.s[self.i]) {
            self.i += 1;
        }
    }
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    /// A JSON string with no escape and no control character; None otherwise.
    #[inline]
    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.i + 1;
        let rest = self.s.get(start..)?;
        if self.simple {
            let n = find_quote(rest)?;
            self.i = start + n + 1;
            return Some(&rest[..n]);
        }
        let n = rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[n] != b'"' {
            return None;
        }
        self.i = start + n + 1;
        Some(&rest[..n])
    }
    /// A JSON number token (RFC 8259 grammar); None when it is not one.
    fn number(&mut self) -> Option<(&'a [u8], bool)> {
        let s = self.s;
        let start = self.i;
        let mut i = start;
        if s.get(i) == Some(&b'-') {
            i += 1;
        }
        match s.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(s.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => return None,
        }
        let mut integral = true;
        if s.get(i) == Some(&b'.') {
            integral = false;
            i += 1;
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                return None;
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            integral = false;
            i += 1;
            if matches!(s.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if !matches!(s.get(i), Some(b'0'..=b'9')) {
                return None;
            }
            while matches!(s.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
        }
        if i - start > 40 {
            return None; // valid JSON, but msgspec's reading of such a token is Python's to give
        }
        self.i = i;
        Some((&s[start..i], integral))
    }
    fn literal(&mut self, word: &[u8]) -> bool {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self) -> Option<Value<'a>> {
        match self.peek()? {
            b'"' => self.string().map(Value::Str),
            b't' => self.literal(b"true").then_some(Value::True),
            b'f' => self.literal(b"false").then_some(Value::False),
            b'n' => self.literal(b"null").then_some(Value::Null),
            b'-' | b'0'..=b'9' => self.number().map(|(t, i)| Value::Num(t, i)),
            _ => None, // an object or array: not a flat record
        }
    }
}

fn float_of(token: &[u8]) -> f64 {
    if let Some(v) = short_decimal(token) {
        return v;
    }
    // the token passed the JSON number grammar, which Rust's (correctly rounded) parser accepts
    std::str::from_utf8(token).ok().and_then(|t| t.parse::<f64>().ok()).unwrap_or(f64::NAN)
}

/// Clinger's fast path, for the usual `ts`: a token of at most 15 digits and no exponent is its digits as an
/// integer (exact in an f64) over a power of ten of at most 15 (exact): one IEEE division, correctly rounded, so
/// the same double as the full parser's (and msgspec's). None for any other token.
#[inline]
fn short_decimal(token: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    let (negative, digits) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    let (mut m, mut n, mut fraction, mut dot) = (0u64, 0usize, 0usize, false);
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                n += 1;
                if n > 15 {
                    return None;
                }
                m = m * 10 + u64::from(b - b'0');
                fraction += usize::from(dot);
            }
            b'.' if !dot => dot = true,
            _ => return None, // an exponent
        }
    }
    let v = m as f64 / POW10[fraction];
    Some(if negative { -v } else { v })
}

/// B3 on a number token: at most 15 integer digits and no exponent is surely within it, without parsing.
#[inline]
fn latency_ok(token: &[u8], integral: bool) -> bool {
    let digits = token.iter().skip(usize::from(token.first() == Some(&b'-'))).take_while(|b| b.is_ascii_digit());
    let exponent = !integral && token.iter().any(|&b| b == b'e' || b == b'E');
    if !exponent && digits.count() <= 15 {
        return true;
    }
    (-LATENCY_MAX..=LATENCY_MAX).contains(&float_of(token))
}

fn int_of(token: &[u8], integral: bool) -> Option<i64> {
    if !integral || token.len() > 18 {
        return None;
    }
    std::str::from_utf8(token).ok()?.parse::<i64>().ok()
}

/// Read one line (no newline in it). Only a line every field of which this reader understands exactly as
/// msgspec would is a `Success`; a doubt makes it Python's.
fn read_line(s: &[u8]) -> Read<'_> {
    if s.len() > LINE_MAX {
        return UNREAD;
    }
    let (simple, ascii) = classify(s);
    if !ascii && std::str::from_utf8(s).is_err() {
        return UNREAD;
    }
    let mut c = Cursor { s, i: 0, simple };
    let mut line = Line::default();
    let mut dep_keys = 0;
    let mut unknown: [&[u8]; UNKNOWN_MAX] = [&[]; UNKNOWN_MAX];
    let mut unknowns = 0;
    c.skip_ws();
    if c.peek() != Some(b'{') {
        return UNREAD;
    }
    c.i += 1;
    c.skip_ws();
    if c.peek() == Some(b'}') {
        return UNREAD;
    }
    loop {
        c.skip_ws();
        if c.peek() != Some(b'"') {
            return UNREAD;
        }
        let Some(key) = c.string() else { return UNREAD };
        c.skip_ws();
        if c.peek() != Some(b':') {
            return UNREAD;
        }
        c.i += 1;
        c.skip_ws();
        let Some(v) = c.value() else { return UNREAD };
        let bit = field_bit(key);
        if bit < 31 {
            if line.seen_keys & (1 << bit) != 0 {
                return UNREAD; // a repeated name (B11): Python refuses the line
            }
            line.seen_keys |= 1 << bit;
        } else {
            // keys hold no escape (`string`), so equal bytes are equal names and unequal bytes unequal ones
            if unknowns == UNKNOWN_MAX || unknown[..unknowns].contains(&key) {
                return UNREAD;
            }
            unknown[unknowns] = key;
            unknowns += 1;
        }
        match (bit, v) {
            (0, Value::Str(x)) => line.schema = Some(x),
            (1, Value::Str(x)) => line.event_id = Some(x),
            (2, Value::Num(t, _)) => line.ts = Some(float_of(t)),
            (3, Value::Str(x)) => {
                line.deployment_id = Some(x);
                dep_keys += 1;
            }
            (3, _) => return UNREAD,
            (4, Value::Str(_)) => line.model_group = true,
            (5, Value::True) => line.ok = Some(true),
            (5, Value::False) => line.ok = Some(false),
            (6, Value::Str(x)) => line.gateway = Some(x),
            (6, Value::Null) => {}
            (7, Value::Num(t, integral)) => {
                if !latency_ok(t, integral) {
                    line.python = true;
                }
            }
            (7..=17, Value::Null) | (10, Value::True) => {}
            (8, Value::Num(t, i)) => {
                if !matches!(int_of(t, i), Some(100..=599)) {
                    line.python = true;
                }
            }
            (9, Value::Num(t, i)) => {
                if !matches!(int_of(t, i), Some(n) if (0..=INT_MAX).contains(&n)) {
                    line.python = true;
                }
            }
            (31, _) => {}
            _ => line.python = true, // a wrong type, `final: false`, or a field only Python decides on
        }
        c.skip_ws();
        match c.peek() {
            Some(b',') => c.i += 1,
            Some(b'}') => {
                c.i += 1;
                break;
            }
            _ => return UNREAD,
        }
    }
    c.skip_ws();
    if c.i != s.len() || dep_keys != 1 {
        return UNREAD;
    }
    let plain = !line.python
        && line.schema.is_some_and(|x| eq(x, b"coolant.outcome/1"))
        && line.model_group
        && line.ok == Some(true)
        && matches!(line.event_id, Some(e) if !e.is_empty() && chars(e) <= EVENT_ID_MAX)
        && matches!(line.ts, Some(t) if (0.0..TS_MAX).contains(&t));
    if plain {
        Read::Success(line)
    } else {
        Read::Python { distinct: true }
    }
}

/// The field a key names (31: none of a record's; 11-17: one that makes the record Python's unless null),
/// by length first: most keys are then one comparison, of a length known at compile time (no memcmp call).
#[inline]
fn field_bit(key: &[u8]) -> u32 {
    match key.len() {
        2 if eq(key, b"ts") => 2,
        2 if eq(key, b"ok") => 5,
        5 if eq(key, b"final") => 10,
        6 if eq(key, b"schema") => 0,
        6 if eq(key, b"source") => 11,
        6 if eq(key, b"origin") => 12,
        7 if eq(key, b"gateway") => 6,
        7 if eq(key, b"attempt") => 9,
        8 if eq(key, b"event_id") => 1,
        9 if eq(key, b"ratelimit") => 13,
        10 if eq(key, b"latency_ms") => 7,
        11 if eq(key, b"model_group") => 4,
        11 if eq(key, b"status_code") => 8,
        11 if eq(key, b"retry_after") => 14,
        13 if eq(key, b"deployment_id") => 3,
        13 if eq(key, b"cooldown_time") => 15,
        14 if eq(key, b"exception_type") => 16,
        17 if eq(key, b"exception_message") => 17,
        _ => 31,
    }
}

/// `s == name` for a name of a length known at compile time: inlined loads, not a memcmp call.
#[inline(always)]
fn eq<const N: usize>(s: &[u8], name: &[u8; N]) -> bool {
    <&[u8; N]>::try_from(s).is_ok_and(|a| a == name)
}

fn chars(s: &[u8]) -> usize {
    s.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

fn is_blank(s: &[u8]) -> bool {
    // bytes.strip()'s whitespace: what `decode_records` skips
    s.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

fn key_bytes(s: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    match s.to_str() {
        Ok(t) => Ok(t.as_bytes().to_vec()),
        Err(_) => Ok(s.call_method1("encode", ("utf-8", "surrogatepass"))?.extract::<Vec<u8>>()?),
    }
}

/// FNV-1a over the bytes, mixed at the end: the hasher of the gateway names (short, few, trusted enough).
#[derive(Default)]
struct BytesHasher(u64);

impl Hasher for BytesHasher {
    fn finish(&self) -> u64 {
        let h = self.0 ^ (self.0 >> 33);
        h.wrapping_mul(0xff51afd7ed558ccd) ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0 ^ 0xcbf29ce484222325;
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        self.0 = h;
    }
}

extern "C" {
    fn memchr(s: *const std::os::raw::c_void, c: std::os::raw::c_int, n: usize) -> *mut std::os::raw::c_void;
}

/// The end of the line that starts at `pos` (libc's memchr, vectorized).
#[inline]
fn line_end(data: &[u8], pos: usize) -> usize {
    let rest = &data[pos..];
    // SAFETY: memchr reads at most rest.len() bytes of rest, which is valid for reads
    let p = unsafe { memchr(rest.as_ptr().cast(), b'\n' as std::os::raw::c_int, rest.len()) };
    if p.is_null() {
        data.len()
    } else {
        pos + (p as usize - rest.as_ptr() as usize)
    }
}

/// A line read ahead: where it ends, and for a plain success its reading, the hash of its deployment id and
/// the index of the deployment it likely is (`Index::guess`).
struct Ahead<'a> {
    end: usize,
    read: Option<(Line<'a>, u64, Option<u32>)>,
    blank: bool,
    /// not a plain success, but read to its end with no name twice (`Read::Python`)
    distinct: bool,
}

/// Ask for the cache lines of `len` bytes at `p` (a hint: no effect on results, none at all off x86-64).
#[inline(always)]
fn prefetch_lines<T>(p: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = p.cast::<i8>();
        let mut off = 0;
        while off < len {
            // SAFETY: a prefetch never faults and reads nothing the program sees
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// The fast path over one policy's in-memory states (see the module docs).
#[pyclass(module = "coolant_native")]
struct FastPath {
    late_after: f64,
    width: f64,
    litellm: bool,
    ttl: f64,
    pod_type: Py<PyAny>,
    index: Index,
    deps: Vec<Dep>,
    /// The publishers' gateway names, interned (as Python strings, for `pull`): a deployment's pod is found
    /// by number, not by name.
    gateway_names: Vec<Py<PyString>>,
    gateway_index: HashMap<Vec<u8>, u32, BuildHasherDefault<BytesHasher>>,
    /// The deployments this side met before Python did, in that order.
    met: Vec<u32>,
    /// The first lines of the deployments met here since the last `take_met`.
    met_lines: Vec<Vec<u8>>,
    /// A plain success of a deployment Python has not met was handed back once: the next ones are met here.
    meets: bool,
    /// plain successes tallied, all deployments
    #[pyo3(get)]
    tallied: u64,
}

impl FastPath {
    #[inline]
    fn find(&self, id: &[u8]) -> Option<u32> {
        self.index.get(&self.deps, id, self.index.hash.of(id))
    }

    fn dep_index(&mut self, id: &[u8]) -> u32 {
        let h = self.index.hash.of(id);
        if let Some(i) = self.index.get(&self.deps, id, h) {
            return i;
        }
        let i = self.deps.len() as u32;
        self.deps.push(Dep::new(id));
        self.index.insert(&self.deps, h, i);
        i
    }

    /// The number of the gateway named `name` (UTF-8, or `key_bytes` of a Python string); `text` makes its
    /// Python string the first time.
    #[inline]
    fn gateway(&mut self, name: &[u8], text: impl FnOnce() -> Py<PyString>) -> u32 {
        if let Some(&g) = self.gateway_index.get(name) {
            return g;
        }
        let g = self.gateway_names.len() as u32;
        self.gateway_names.push(text());
        self.gateway_index.insert(name.to_vec(), g);
        g
    }

    /// Tally a plain success of an owned deployment; false when it must go to Python.
    #[inline]
    fn tally(&mut self, py: Python<'_>, i: u32, line: &Line<'_>) -> bool {
        let h = self.index.hash.of(line.event_id.unwrap_or_default());
        self.tally_with(py, i, line.gateway.unwrap_or_default(), h, line.ts.unwrap_or_default())
    }

    /// `tally` of a line read already: its gateway (UTF-8, "" when absent), the hash of its event id, its ts.
    fn tally_with(&mut self, py: Python<'_>, i: u32, gateway: &[u8], h: u64, ts: f64) -> bool {
        let gw = match self.litellm {
            true => {
                let name = gateway; // read from a line: UTF-8
                Some(self.gateway(name, || PyString::new(py, std::str::from_utf8(name).unwrap_or_default()).unbind()))
            }
            false => None,
        };
        let (late_after, width, ttl) = (self.late_after, self.width, self.ttl);
        let d = &mut self.deps[i as usize];
        if d.mode != Mode::Owned {
            return false;
        }
        if gw.is_some() {
            // wanted after the seen-id lookup: load them meanwhile
            prefetch_lines(d.pod_gw.as_ptr(), d.pod_gw.len() * std::mem::size_of::<u32>());
            prefetch_lines(d.pods.as_ptr(), d.pods.len() * std::mem::size_of::<Pod>());
        }
        let due = ts > d.hw && ts >= d.gc_next; // L3 is due (once per event-time minute)
        let hand = d.hw - ts > late_after // L1
            || d.seen.contains(h) // L2
            || (due && d.slots() >= MAX_SLOTS);
        if hand {
            return false;
        }
        d.seen.insert(h, ts);
        if ts > d.hw {
            d.hw = ts;
            if due {
                // `_accept`'s schedule, and L3 on the seen ids kept here; the rest of L3 (windows, V1 and D7
                // counters) is the engine's `windows.discard`, run at this mark when the deployment is pulled
                d.gc_next = (floordiv(ts, 60.0) + 1.0) * 60.0;
                d.seen.forget_before(ts - late_after);
                d.owed = ts;
            }
        }
        d.tally_slot(slot(ts, width)); // O5
        if let Some(g) = gw {
            // LC2 on the publisher's success counter
            let p = match d.pod_gw.iter().position(|&x| x == g) {
                Some(p) => p,
                None => {
                    d.pod_gw.push(g);
                    d.pods.push(Pod { s_anchor: f64::NEG_INFINITY, s_count: 0, dirty: false });
                    d.pods.len() - 1
                }
            };
            let pod = &mut d.pods[p];
            if ts >= pod.s_anchor + ttl {
                pod.s_anchor = ts;
                pod.s_count = 1;
            } else {
                pod.s_count += 1;
            }
            pod.dirty = true;
        }
        d.counted += 1;
        self.tallied += 1;
        true
    }

    /// Read the line at `pos` (one ahead of the tally) and start loading its deployment's entry into the cache.
    #[inline]
    fn ahead<'a>(&self, data: &'a [u8], pos: usize) -> Ahead<'a> {
        let end = line_end(data, pos);
        let raw = &data[pos..end];
        if is_blank(raw) {
            return Ahead { end, read: None, blank: true, distinct: false };
        }
        let l = match read_line(raw) {
            Read::Success(l) => l,
            Read::Python { distinct } => return Ahead { end, read: None, blank: false, distinct },
        };
        let h = self.index.hash.of(l.deployment_id.unwrap_or_default());
        let guess = self.index.guess(h);
        if let Some(i) = guess {
            prefetch_lines(&self.deps[i as usize], std::mem::size_of::<Dep>());
        }
        Ahead { end, read: Some((l, h, guess)), blank: false, distinct: true }
    }

    /// A deployment Python has no state for, met in a plain success: held from a fresh `PathState`'s values
    /// (nothing pending, no seen id), as if Python had created it and pushed it at once.
    fn meet(&mut self, id: &[u8], h: u64) -> u32 {
        let i = self.deps.len() as u32;
        let mut d = Dep::new(id);
        d.mode = Mode::Owned;
        d.new = true;
        self.deps.push(d);
        self.index.insert(&self.deps, h, i);
        self.met.push(i);
        i
    }
}

#[pymethods]
impl FastPath {
    #[new]
    fn new(late_after: f64, slot_width: i64, litellm_counters: bool, counter_ttl: f64, pod_type: Py<PyAny>) -> Self {
        FastPath {
            late_after,
            width: slot_width as f64,
            litellm: litellm_counters,
            ttl: counter_ttl,
            pod_type,
            index: Index::new(),
            deps: Vec::new(),
            gateway_names: Vec::new(),
            gateway_index: HashMap::default(),
            met: Vec::new(),
            met_lines: Vec::new(),
            meets: false,
            tallied: 0,
        }
    }

    /// Scan `data` from byte `pos` (line number `line` of the block, from 0), tallying what this side owns,
    /// up to the first line it does not: returns (next pos, next line, that line's number, its bytes, whether
    /// it is a flat object that names nothing twice), or (len, lines, 0, None, False) at the end. Python decides that line before the scan goes on. A plain success of
    /// a deployment Python has not met is this side's from then on (`is_new`, `new_ids`).
    fn scan<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
        pos: usize,
        line: usize,
    ) -> (usize, usize, usize, Option<Bound<'py, PyBytes>>, bool) {
        let mut pos = pos;
        let mut lineno = line;
        let mut next = (pos < data.len()).then(|| self.ahead(data, pos));
        while let Some(cur) = next.take() {
            let raw = &data[pos..cur.end];
            let here = lineno;
            pos = (cur.end + 1).min(data.len());
            lineno += 1;
            if pos < data.len() {
                next = Some(self.ahead(data, pos)); // its deployment's entry comes into the cache meanwhile
            }
            let Some((l, h, guess)) = cur.read else {
                if cur.blank {
                    continue;
                }
                return (pos, lineno, here, Some(PyBytes::new(py, raw)), cur.distinct);
            };
            let id = l.deployment_id.unwrap_or_default();
            let found = match guess {
                Some(g) if self.deps[g as usize].key() == id => Some(g),
                _ => self.index.get(&self.deps, id, h), // another id's entry, or one met since
            };
            let i = match found {
                Some(i) => Some(i),
                None if self.meets => {
                    let i = self.meet(id, h);
                    if self.tally(py, i, &l) {
                        // the engine yields a step for a deployment's first record instead of counting it
                        // in `counted` (FP1): Python yields the same for this line (`take_met`)
                        self.deps[i as usize].counted -= 1;
                        self.met_lines.push(raw.to_vec());
                        continue;
                    }
                    Some(i)
                }
                None => {
                    // The run's first such line is still Python's: the pure path yields a step (COUNTED)
                    // for each deployment's first record, and the replay summary lists dispositions in
                    // the order they first occur. After that one, another changes no order.
                    self.meets = true;
                    None
                }
            };
            if i.is_some_and(|i| self.tally(py, i, &l)) {
                continue;
            }
            return (pos, lineno, here, Some(PyBytes::new(py, raw)), true);
        }
        (data.len(), lineno, 0, None, false)
    }

    /// Take `compact`'s hash key, before this side has met any deployment: its lines' hashes are then this side's.
    fn adopt(&mut self, compact: PyRef<'_, Compact>) -> PyResult<()> {
        if !self.deps.is_empty() {
            return Err(PyTypeError::new_err("adopt a Compact before the first scan"));
        }
        self.index.hash = compact.hash.clone();
        Ok(())
    }

    /// `scan` over a recording read once for every policy (`Compact`, whose hash key this side took: `adopt`),
    /// from its line `pos`: returns (next pos, that line's block, its number in the block, its bytes, whether it
    /// is a flat object that names nothing twice), or (len, 0, 0, None, False) at the end.
    fn scan_compact<'py>(
        &mut self,
        py: Python<'py>,
        compact: PyRef<'_, Compact>,
        pos: usize,
    ) -> (usize, usize, usize, Option<Bound<'py, PyBytes>>, bool) {
        let lines = &compact.lines;
        let raw = |e: &CompactLine| -> Bound<'py, PyBytes> {
            let data = compact.blocks[e.block as usize].bind(py).as_bytes();
            PyBytes::new(py, &data[e.start as usize..e.end as usize])
        };
        let mut p = pos;
        while p < lines.len() {
            let e = lines[p];
            p += 1;
            if e.dep == u32::MAX {
                return (p, e.block as usize, e.line as usize, Some(raw(&e)), e.distinct);
            }
            let id = &compact.deps[e.dep as usize];
            let gw = &compact.gateways[e.gateway as usize];
            let i = match self.index.get(&self.deps, id, e.dep_hash) {
                Some(i) => Some(i),
                None if self.meets => {
                    let i = self.meet(id, e.dep_hash);
                    if self.tally_with(py, i, gw, e.event, e.ts) {
                        // as `scan`: the engine yields a step for a deployment's first record (`take_met`)
                        self.deps[i as usize].counted -= 1;
                        self.met_lines.push(raw(&e).as_bytes().to_vec());
                        continue;
                    }
                    Some(i)
                }
                None => {
                    self.meets = true; // as `scan`: the run's first such line is Python's
                    None
                }
            };
            if i.is_some_and(|i| self.tally_with(py, i, gw, e.event, e.ts)) {
                continue;
            }
            return (p, e.block as usize, e.line as usize, Some(raw(&e)), true);
        }
        (lines.len(), 0, 0, None, false)
    }

    /// Whether this side holds `deployment_id` and Python has no state for it yet (the caller creates one
    /// before `pull`).
    fn is_new(&self, deployment_id: &Bound<'_, PyString>) -> PyResult<bool> {
        let key = key_bytes(deployment_id)?;
        Ok(self.find(&key).is_some_and(|i| self.deps[i as usize].new))
    }

    /// The first line of each deployment this side met (in that order) since the last call: tallied here,
    /// but not in the deployment's `counted`, since the engine yields a (COUNTED) step for a deployment's
    /// first record.
    fn take_met<'py>(&mut self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.met_lines.drain(..).map(|l| PyBytes::new(py, &l)).collect()
    }

    /// The deployments this side holds that Python has no state for, in the order this side met them.
    fn new_ids(&self) -> Vec<String> {
        self.met
            .iter()
            .map(|&i| &self.deps[i as usize])
            .filter(|d| d.new)
            .map(|d| String::from_utf8_lossy(d.key()).into_owned()) // read from a line: valid UTF-8
            .collect()
    }

    /// Write what this side tallied for `deployment_id` into its `DeploymentState` (`st`): the request
    /// path's hw, gc_next, window counts and publisher success counters, and `st.counted` (and, for a
    /// deployment this side met first, its seen ids: `ps.seen` becomes a `SeenIds` view). Python then owns
    /// the deployment until `push`. Returns the high-water mark of an L3 this side ran only on the seen ids
    /// (the caller runs `windows.discard` as of that mark), or None.
    fn pull(
        slf: &Bound<'_, Self>,
        deployment_id: &Bound<'_, PyString>,
        st: &Bound<'_, PyAny>,
    ) -> PyResult<Option<f64>> {
        let py = slf.py();
        let key = key_bytes(deployment_id)?;
        let mut guard = slf.borrow_mut();
        let Some(i) = guard.find(&key) else { return Ok(None) };
        let FastPath { deps, gateway_names, litellm, pod_type, .. } = &mut *guard;
        let d = &mut deps[i as usize];
        if d.mode == Mode::Python {
            d.fresh = false; // Python steps another record before any push
            return Ok(None);
        }
        let ps = st.getattr(intern!(py, "request"))?;
        ps.setattr(intern!(py, "hw"), d.hw)?;
        ps.setattr(intern!(py, "gc_next"), d.gc_next)?;
        if d.cur_n != 0 {
            d.windows.push((d.cur_slot, d.cur_n));
            d.cur_n = 0;
        }
        if !d.windows.is_empty() {
            let windows = ps.getattr(intern!(py, "windows"))?.cast_into::<PyDict>()?;
            for &(k, n) in &d.windows {
                match windows.get_item(k)? {
                    Some(cell) => {
                        let cell = cell.cast_into::<PyList>()?;
                        let s: i64 = cell.get_item(0)?.extract()?;
                        cell.set_item(0, s + n)?;
                    }
                    None => windows.set_item(k, PyList::new(py, [n, 0])?)?,
                }
            }
            d.windows.clear();
        }
        if *litellm && d.pods.iter().any(|p| p.dirty) {
            // only the counters tallied since the push: Python's others are as this side read them
            let pods = ps.getattr(intern!(py, "litellm"))?.cast_into::<PyDict>()?;
            for (p, &g) in d.pods.iter_mut().zip(&d.pod_gw) {
                if !p.dirty {
                    continue;
                }
                p.dirty = false;
                let gw = gateway_names[g as usize].bind(py);
                match pods.get_item(gw)? {
                    Some(pod) => {
                        pod.setattr(intern!(py, "s_anchor"), p.s_anchor)?;
                        pod.setattr(intern!(py, "s_count"), p.s_count)?;
                    }
                    None => pods.set_item(gw, pod_type.bind(py).call1((p.s_anchor, p.s_count))?)?,
                }
            }
        }
        if d.counted != 0 {
            let counted: i64 = st.getattr(intern!(py, "counted"))?.extract()?;
            st.setattr(intern!(py, "counted"), counted + d.counted)?;
            d.counted = 0;
        }
        d.mode = Mode::Python;
        d.fresh = true;
        let owed = d.owed;
        d.owed = f64::NEG_INFINITY;
        let new = std::mem::replace(&mut d.new, false);
        drop(guard);
        if new {
            ps.setattr(intern!(py, "seen"), Py::new(py, SeenIds { fast: slf.clone().unbind(), dep: i })?)?;
        }
        Ok((owed > f64::NEG_INFINITY).then_some(owed))
    }

    /// Take `deployment_id` over from Python's `DeploymentState` `st` when nothing is pending on its request
    /// path (no probation, X7.2), so its plain successes are tallied here: the seen ids move into this side's
    /// store (`ps.seen` becomes a `SeenIds` view of it). Returns whether it was taken.
    ///
    /// `gateway`: the publisher of the outcome Python just stepped (`rec.gateway or ""`), None for another
    /// record. Right after the pull for that one step, only its publisher's counters can have changed (LC2; L3
    /// drops spent ones, which this side's copies re-anchor as a new one would): the others are not read again.
    #[pyo3(signature = (deployment_id, st, gateway=None))]
    fn push(
        slf: &Bound<'_, Self>,
        deployment_id: &Bound<'_, PyString>,
        st: &Bound<'_, PyAny>,
        gateway: Option<&Bound<'_, PyString>>,
    ) -> PyResult<bool> {
        let py = slf.py();
        let ps = st.getattr(intern!(py, "request"))?;
        let key = key_bytes(deployment_id)?;
        let mut me = slf.borrow_mut();
        let i = me.dep_index(&key);
        if me.deps[i as usize].mode != Mode::Python {
            return Ok(true);
        }
        let fresh = std::mem::replace(&mut me.deps[i as usize].fresh, false);
        if ps.getattr(intern!(py, "probation"))?.is_truthy()? {
            return Ok(false);
        }
        if fresh {
            let hw: f64 = ps.getattr(intern!(py, "hw"))?.extract()?;
            let gc_next: f64 = ps.getattr(intern!(py, "gc_next"))?.extract()?;
            let mut stepped = None;
            if let (true, Some(gw)) = (me.litellm, gateway) {
                if let Some(pod) = ps.getattr(intern!(py, "litellm"))?.cast_into::<PyDict>()?.get_item(gw)? {
                    let g = me.gateway(&key_bytes(gw)?, || gw.clone().unbind());
                    let s_anchor: f64 = pod.getattr(intern!(py, "s_anchor"))?.extract()?;
                    let s_count: i64 = pod.getattr(intern!(py, "s_count"))?.extract()?;
                    stepped = Some((g, Pod { s_anchor, s_count, dirty: false }));
                }
            }
            let d = &mut me.deps[i as usize];
            if let Some((g, pod)) = stepped {
                match d.pod_gw.iter().position(|&x| x == g) {
                    Some(p) => d.pods[p] = pod,
                    None => {
                        d.pod_gw.push(g);
                        d.pods.push(pod);
                    }
                }
            }
            d.hw = hw;
            d.gc_next = gc_next;
            d.owed = f64::NEG_INFINITY;
            d.mode = Mode::Owned;
            return Ok(true);
        }
        let seen = ps.getattr(intern!(py, "seen"))?;
        let view = seen.cast::<SeenIds>();
        let absorb = match view {
            Ok(v) => {
                if v.borrow().dep != i {
                    return Ok(false);
                }
                None
            }
            Err(_) => match seen.cast::<PyDict>() {
                Ok(dict) if dict.is_exact_instance_of::<PyDict>() => Some(dict.clone()),
                _ => return Ok(false), // another store: Python keeps the deployment
            },
        };
        let hw: f64 = ps.getattr(intern!(py, "hw"))?.extract()?;
        let gc_next: f64 = ps.getattr(intern!(py, "gc_next"))?.extract()?;
        let (mut pod_gw, mut pods) = (Vec::new(), Vec::new());
        if me.litellm {
            for (gw, pod) in ps.getattr(intern!(py, "litellm"))?.cast_into::<PyDict>()?.iter() {
                let gw = gw.cast_into::<PyString>()?;
                pod_gw.push(me.gateway(&key_bytes(&gw)?, || gw.clone().unbind()));
                pods.push(Pod {
                    s_anchor: pod.getattr(intern!(py, "s_anchor"))?.extract()?,
                    s_count: pod.getattr(intern!(py, "s_count"))?.extract()?,
                    dirty: false,
                });
            }
        }
        let hash = me.index.hash.clone();
        let d = &mut me.deps[i as usize];
        if let Some(dict) = &absorb {
            for (k, t) in dict.iter() {
                let k = k.cast_into::<PyString>()?;
                d.seen.insert(hash.of(&key_bytes(&k)?), t.extract()?);
            }
        }
        d.hw = hw;
        d.gc_next = gc_next;
        d.pod_gw = pod_gw;
        d.pods = pods;
        d.windows.clear();
        d.cur_n = 0;
        d.owed = f64::NEG_INFINITY;
        d.mode = Mode::Owned;
        drop(me);
        if absorb.is_some() {
            ps.setattr(intern!(py, "seen"), Py::new(py, SeenIds { fast: slf.clone().unbind(), dep: i })?)?;
        }
        Ok(true)
    }

    /// Deployments whose request path is owned here (for tests and the profile).
    fn owned(&self) -> usize {
        self.deps.iter().filter(|d| d.mode != Mode::Python).count()
    }
}

/// One non-blank line of a recording as `Compact` read it: a plain success's fields, hashed, or (`dep` u32::MAX)
/// a line that is Python's whatever the state.
#[derive(Clone, Copy)]
struct CompactLine {
    ts: f64,
    event: u64,
    dep_hash: u64,
    dep: u32,
    gateway: u32,
    block: u32,
    line: u32,
    start: u32,
    end: u32,
    /// where the event id's bytes are in the block (a plain success's)
    ev_start: u32,
    ev_len: u32,
    distinct: bool,
}

/// A recording's blocks read once (`read_line` on every line) for the runs of many policies over it, each by its
/// own `FastPath` (`adopt`, `scan_compact`): what `scan` reads of a line does not depend on any state, so
/// `coolant tune` reads it once instead of once per policy. Deployment and event ids are hashed under this
/// object's key, drawn once.
#[pyclass(module = "coolant_native", frozen)]
struct Compact {
    hash: IdHash,
    lines: Vec<CompactLine>,
    deps: Vec<Vec<u8>>,
    gateways: Vec<Vec<u8>>,
    blocks: Vec<Py<PyBytes>>,
}

fn intern_bytes(index: &mut HashMap<Vec<u8>, u32>, names: &mut Vec<Vec<u8>>, name: &[u8]) -> u32 {
    if let Some(&n) = index.get(name) {
        return n;
    }
    let n = names.len() as u32;
    names.push(name.to_vec());
    index.insert(name.to_vec(), n);
    n
}

#[pymethods]
impl Compact {
    /// Read `blocks` (each a block's bytes, in file order; under 4 GB each).
    #[new]
    fn new(blocks: Vec<Bound<'_, PyBytes>>) -> PyResult<Self> {
        let hash = IdHash(Default::default());
        let (mut lines, mut deps, mut gateways) = (Vec::new(), Vec::new(), Vec::new());
        let (mut dep_index, mut gw_index) = (HashMap::new(), HashMap::new());
        for (b, block) in blocks.iter().enumerate() {
            let data = block.as_bytes();
            if data.len() >= u32::MAX as usize {
                return Err(PyTypeError::new_err("a block of 4 GB or more"));
            }
            let (mut pos, mut lineno) = (0usize, 0u32);
            while pos < data.len() {
                let end = line_end(data, pos);
                let raw = &data[pos..end];
                if !is_blank(raw) {
                    let mut e = CompactLine {
                        ts: 0.0,
                        event: 0,
                        dep_hash: 0,
                        dep: u32::MAX,
                        gateway: 0,
                        block: b as u32,
                        line: lineno,
                        start: pos as u32,
                        end: end as u32,
                        ev_start: 0,
                        ev_len: 0,
                        distinct: false,
                    };
                    match read_line(raw) {
                        Read::Success(l) => {
                            let id = l.deployment_id.unwrap_or_default();
                            e.dep = intern_bytes(&mut dep_index, &mut deps, id);
                            e.dep_hash = hash.of(id);
                            let ev = l.event_id.unwrap_or_default();
                            e.event = hash.of(ev);
                            e.ev_start = (ev.as_ptr() as usize - data.as_ptr() as usize) as u32;
                            e.ev_len = ev.len() as u32;
                            e.ts = l.ts.unwrap_or_default();
                            e.gateway = intern_bytes(&mut gw_index, &mut gateways, l.gateway.unwrap_or_default());
                        }
                        Read::Python { distinct } => e.distinct = distinct,
                    }
                    lines.push(e);
                }
                pos = (end + 1).min(data.len());
                lineno += 1;
            }
        }
        let blocks = blocks.into_iter().map(|b| b.unbind()).collect();
        Ok(Compact { hash, lines, deps, gateways, blocks })
    }

    fn __len__(&self) -> usize {
        self.lines.len()
    }

    /// The lines that are not plain successes, Python's to decode: (their number here, block, line number in the
    /// block, bytes, whether it is a flat object that names nothing twice), in file order.
    #[allow(clippy::type_complexity)]
    fn python_lines<'py>(&self, py: Python<'py>) -> Vec<(usize, usize, usize, Bound<'py, PyBytes>, bool)> {
        let datas: Vec<&[u8]> = self.blocks.iter().map(|b| b.bind(py).as_bytes()).collect();
        let mut out = Vec::new();
        for (n, e) in self.lines.iter().enumerate() {
            if e.dep == u32::MAX {
                let raw = &datas[e.block as usize][e.start as usize..e.end as usize];
                out.push((n, e.block as usize, e.line as usize, PyBytes::new(py, raw), e.distinct));
            }
        }
        out
    }

    /// The traffic the tuning metrics count (coolant.tuning.traffic): (deployment id, the ts of its failures, of
    /// its successes) for each deployment with either, in file order, each (deployment, event id) once (the first). The plain successes are
    /// this side's; `others` are the outcomes among `python_lines`, decoded: (number here, deployment id, event
    /// id, ts, kind: 0 failure, 1 success, 2 neither), in file order. Also (the number of plain successes, the
    /// least and the greatest of their ts).
    #[allow(clippy::type_complexity)]
    fn traffic(
        &self,
        py: Python<'_>,
        others: Vec<(usize, String, String, f64, u8)>,
    ) -> (Vec<(String, Vec<f64>, Vec<f64>)>, usize, f64, f64) {
        let datas: Vec<&[u8]> = self.blocks.iter().map(|b| b.bind(py).as_bytes()).collect();
        let mut names: Vec<&[u8]> = self.deps.iter().map(|d| d.as_slice()).collect();
        let mut number: HashMap<&[u8], u32> = names.iter().enumerate().map(|(i, &d)| (d, i as u32)).collect();
        let mut kept: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); names.len()];
        // each (deployment, event id) once: ids compared as bytes, hashed once (a plain success's hash is the one
        // `Compact::new` took of the same bytes), the set sized for every line at the start
        let mut seen: std::collections::HashSet<EventKey<'_>, BuildHasherDefault<IdHasher>> =
            std::collections::HashSet::with_capacity_and_hasher(self.lines.len() + others.len(), Default::default());
        let (mut count, mut lo, mut hi) = (0usize, f64::INFINITY, f64::NEG_INFINITY);
        let mut next = others.iter().peekable();
        for n in 0..=self.lines.len() {
            while let Some(o) = next.next_if(|o| o.0 <= n) {
                let dep = o.1.as_bytes();
                let d = match number.get(dep) {
                    Some(&d) => d,
                    None => {
                        let d = names.len() as u32;
                        names.push(dep);
                        number.insert(dep, d);
                        kept.push((Vec::new(), Vec::new()));
                        d
                    }
                };
                let id = o.2.as_bytes();
                if seen.insert(EventKey::new(d, id, self.hash.of(id))) {
                    match o.4 {
                        0 => kept[d as usize].0.push(o.3),
                        1 => kept[d as usize].1.push(o.3),
                        _ => {}
                    }
                }
            }
            let Some(e) = self.lines.get(n) else { break };
            if e.dep == u32::MAX {
                continue;
            }
            count += 1;
            lo = lo.min(e.ts);
            hi = hi.max(e.ts);
            let ev = &datas[e.block as usize][e.ev_start as usize..(e.ev_start + e.ev_len) as usize];
            if seen.insert(EventKey::new(e.dep, ev, e.event)) {
                kept[e.dep as usize].1.push(e.ts);
            }
        }
        let out = names
            .iter()
            .zip(kept)
            .filter(|(_, (f, s))| !f.is_empty() || !s.is_empty())
            .map(|(d, (f, s))| (String::from_utf8_lossy(d).into_owned(), f, s)) // read from lines: UTF-8
            .collect();
        (out, count, lo, hi)
    }
}

/// A (deployment number, event id) of `Compact::traffic`'s set: equal when both are (the id as bytes), hashed by
/// the id's keyed hash (`IdHash`) mixed with the number, computed once.
#[derive(Clone, Copy)]
struct EventKey<'a> {
    dep: u32,
    id: &'a [u8],
    h: u64,
}

impl<'a> EventKey<'a> {
    #[inline]
    fn new(dep: u32, id: &'a [u8], id_hash: u64) -> Self {
        EventKey { dep, id, h: id_hash ^ u64::from(dep).wrapping_mul(0x9E37_79B9_7F4A_7C15) }
    }
}

impl PartialEq for EventKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.dep == other.dep && self.id == other.id
    }
}

impl Eq for EventKey<'_> {}

impl std::hash::Hash for EventKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.h);
    }
}

/// One deployment's seen ids (L2), kept by `FastPath` as 64-bit hashes: the `PathState.seen` of a deployment
/// the fast path has owned. A mapping of event id to ts that cannot list its ids; it forgets expired ones itself
/// (`ForgetsExpired`, L3).
#[pyclass(module = "coolant_native")]
struct SeenIds {
    fast: Py<FastPath>,
    dep: u32,
}

impl SeenIds {
    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut Seen) -> R) -> R {
        let mut fast = self.fast.bind(py).borrow_mut();
        f(&mut fast.deps[self.dep as usize].seen)
    }

    fn hash(&self, py: Python<'_>, event_id: &Bound<'_, PyString>) -> PyResult<u64> {
        Ok(self.fast.bind(py).borrow().index.hash.of(&key_bytes(event_id)?))
    }
}

#[pymethods]
impl SeenIds {
    fn __contains__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>) -> PyResult<bool> {
        let h = self.hash(py, event_id)?;
        Ok(self.with(py, |s| s.contains(h)))
    }

    fn __getitem__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>) -> PyResult<f64> {
        let h = self.hash(py, event_id)?;
        self.with(py, |s| s.ts.get(&h).copied()).ok_or_else(|| PyKeyError::new_err(event_id.clone().unbind()))
    }

    fn __setitem__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>, ts: f64) -> PyResult<()> {
        let h = self.hash(py, event_id)?;
        self.with(py, |s| s.insert(h, ts));
        Ok(())
    }

    fn __delitem__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>) -> PyResult<()> {
        let h = self.hash(py, event_id)?;
        match self.with(py, |s| s.ts.remove(&h)) {
            Some(_) => Ok(()),
            None => Err(PyKeyError::new_err(event_id.clone().unbind())),
        }
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.with(py, |s| s.ts.len())
    }

    fn __iter__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err("seen ids are kept as 64-bit hashes: they cannot be listed"))
    }

    /// L3: forget the ids of records before `horizon`, oldest inserted first, up to the first one still live
    /// (what `windows.discard` does to a dict).
    fn forget_before(&self, py: Python<'_>, horizon: f64) {
        self.with(py, |s| s.forget_before(horizon));
    }
}

#[pymodule]
fn coolant_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // `coolant.native_backend.NATIVE_API`: what `scan` answers and `push` takes; bumped with either
    m.add("API", 2)?;
    m.add_class::<FastPath>()?;
    m.add_class::<Compact>()?;
    m.add_class::<SeenIds>()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path gives the full parser's double for every short token, and declines the rest.
    #[test]
    fn short_decimals_are_parsed_as_the_full_parser_does() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let text = (x % 1_000_000_000_000_000).to_string();
            let cut = (x >> 50) as usize % text.len();
            let (whole, fraction) = text.split_at(cut.clamp(1, text.len()));
            let token = if fraction.is_empty() { whole.to_string() } else { format!("{whole}.{fraction}") };
            for t in [token.clone(), format!("-{token}")] {
                let want: f64 = t.parse().unwrap();
                match short_decimal(t.as_bytes()) {
                    Some(v) => assert_eq!(v.to_bits(), want.to_bits(), "{t}"),
                    None => assert!(t.bytes().filter(u8::is_ascii_digit).count() > 15, "{t}"),
                }
            }
        }
        assert_eq!(short_decimal(b"1800000000.162"), Some(1800000000.162));
        assert_eq!(short_decimal(b"1e5"), None);
        assert_eq!(short_decimal(b"1234567890.1234567"), None);
        assert_eq!(short_decimal(b"-0.0").map(f64::to_bits), Some((-0.0f64).to_bits()));
    }
}
