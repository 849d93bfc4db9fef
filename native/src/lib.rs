//! coolant's success fast path (docs/engine-fast-path.md, FP2): the native backend of `coolant.fastpath`.
//!
//! A narrow primitive. `FastPath.scan` reads a block of JSONL lines and *owns* only the plain successes of
//! deployments it was handed (`push`) with nothing pending: it checks them late (L1) and duplicate (L2, on
//! 64-bit hashes of the event id), advances the high-water mark, and tallies them into per-deployment counters
//! (the O5 window, the publisher's D7 success counter, LC2). Every other line is handed back to Python, in
//! file order, and Python's engine decides it: failures, probes, pre-call checks, non-final attempts, late and
//! duplicate records, a record due for L3, lines it cannot read exactly as msgspec would. The scan stops at
//! each such line; `pull` writes that deployment's counters back into its Python `PathState` before the engine
//! sees the record, and `push` takes the deployment back after it when nothing is pending.

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// FNV-1a over the id's UTF-8 bytes, then murmur3's finalizer so every bit of the table index is mixed.
fn id_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ceb9fe1a85ec53);
    h ^ (h >> 33)
}

/// Python's `ts // width` for ts >= 0 and width > 0 (Objects/floatobject.c, float_floor_div).
fn floordiv(ts: f64, width: f64) -> f64 {
    let m = ts % width;
    let div = (ts - m) / width;
    let mut fl = div.floor();
    if div - fl > 0.5 {
        fl += 1.0;
    }
    fl
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

struct Pod {
    gateway: Vec<u8>,
    s_anchor: f64,
    s_count: i64,
}

struct Dep {
    mode: Mode,
    hw: f64,
    gc_next: f64,
    /// (slot, successes tallied since the last pull)
    windows: Vec<(i64, i64)>,
    pods: Vec<Pod>,
    counted: i64,
    seen: Seen,
    /// The high-water mark of the last L3 this side ran on the seen ids (-inf: none since the last pull): the
    /// engine runs the rest of that L3 (`windows.discard` at that mark) when it pulls the deployment.
    owed: f64,
}

impl Dep {
    fn new() -> Self {
        Dep {
            mode: Mode::Python,
            hw: f64::NEG_INFINITY,
            gc_next: f64::NEG_INFINITY,
            windows: Vec::new(),
            pods: Vec::new(),
            counted: 0,
            seen: Seen::default(),
            owed: f64::NEG_INFINITY,
        }
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
    /// Not a plain success, or not surely read as msgspec reads it: Python's.
    Python,
    Success(Line<'a>),
}

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
    // the token passed the JSON number grammar, which Rust's (correctly rounded) parser accepts
    std::str::from_utf8(token).ok().and_then(|t| t.parse::<f64>().ok()).unwrap_or(f64::NAN)
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
    if s.len() > LINE_MAX || std::str::from_utf8(s).is_err() {
        return Read::Python;
    }
    let mut c = Cursor { s, i: 0 };
    let mut line = Line::default();
    let mut dep_keys = 0;
    c.skip_ws();
    if c.peek() != Some(b'{') {
        return Read::Python;
    }
    c.i += 1;
    c.skip_ws();
    if c.peek() == Some(b'}') {
        return Read::Python;
    }
    loop {
        c.skip_ws();
        if c.peek() != Some(b'"') {
            return Read::Python;
        }
        let Some(key) = c.string() else { return Read::Python };
        c.skip_ws();
        if c.peek() != Some(b':') {
            return Read::Python;
        }
        c.i += 1;
        c.skip_ws();
        let Some(v) = c.value() else { return Read::Python };
        let bit = field_bit(key);
        if bit < 11 {
            if line.seen_keys & (1 << bit) != 0 {
                return Read::Python; // a repeated field: which value wins is the decoder's business
            }
            line.seen_keys |= 1 << bit;
        }
        match (bit, v) {
            (0, Value::Str(x)) => line.schema = Some(x),
            (1, Value::Str(x)) => line.event_id = Some(x),
            (2, Value::Num(t, _)) => line.ts = Some(float_of(t)),
            (3, Value::Str(x)) => {
                line.deployment_id = Some(x);
                dep_keys += 1;
            }
            (3, _) => return Read::Python,
            (4, Value::Str(_)) => line.model_group = true,
            (5, Value::True) => line.ok = Some(true),
            (5, Value::False) => line.ok = Some(false),
            (6, Value::Str(x)) => line.gateway = Some(x),
            (6, Value::Null) => {}
            (7, Value::Num(t, _)) => {
                let x = float_of(t);
                if !(-LATENCY_MAX..=LATENCY_MAX).contains(&x) {
                    line.python = true;
                }
            }
            (7 | 8 | 9 | 10 | 11, Value::Null) | (10, Value::True) => {}
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
            _ => return Read::Python,
        }
    }
    c.skip_ws();
    if c.i != s.len() || dep_keys != 1 {
        return Read::Python;
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
        Read::Python
    }
}

/// The field a key names (bit 31: none of a record's; bit 11: one that makes the record Python's unless null),
/// by length first: most keys are then one comparison, of a length known at compile time (no memcmp call).
#[inline]
fn field_bit(key: &[u8]) -> u32 {
    match key.len() {
        2 if eq(key, b"ts") => 2,
        2 if eq(key, b"ok") => 5,
        5 if eq(key, b"final") => 10,
        6 if eq(key, b"schema") => 0,
        6 if eq(key, b"source") => 11,
        7 if eq(key, b"gateway") => 6,
        7 if eq(key, b"attempt") => 9,
        8 if eq(key, b"event_id") => 1,
        9 if eq(key, b"ratelimit") => 11,
        10 if eq(key, b"latency_ms") => 7,
        11 if eq(key, b"model_group") => 4,
        11 if eq(key, b"status_code") => 8,
        11 if eq(key, b"retry_after") => 11,
        13 if eq(key, b"deployment_id") => 3,
        13 if eq(key, b"cooldown_time") => 11,
        14 if eq(key, b"exception_type") => 11,
        17 if eq(key, b"exception_message") => 11,
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

/// The fast path over one policy's in-memory states (see the module docs).
#[pyclass(module = "coolant_native")]
struct FastPath {
    late_after: f64,
    width: f64,
    litellm: bool,
    ttl: f64,
    pod_type: Py<PyAny>,
    index: HashMap<Vec<u8>, u32>,
    deps: Vec<Dep>,
    /// plain successes tallied, all deployments
    #[pyo3(get)]
    tallied: u64,
}

impl FastPath {
    fn dep_index(&mut self, id: &[u8]) -> u32 {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        let i = self.deps.len() as u32;
        self.deps.push(Dep::new());
        self.index.insert(id.to_vec(), i);
        i
    }

    /// Tally a plain success of an owned deployment; false when it must go to Python.
    fn tally(&mut self, i: u32, line: &Line<'_>) -> bool {
        let d = &mut self.deps[i as usize];
        if d.mode != Mode::Owned {
            return false;
        }
        let ts = line.ts.unwrap_or_default();
        let h = id_hash(line.event_id.unwrap_or_default());
        let due = ts > d.hw && ts >= d.gc_next; // L3 is due (once per event-time minute)
        let hand = d.hw - ts > self.late_after // L1
            || d.seen.contains(h) // L2
            || (due && d.windows.len() >= MAX_SLOTS);
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
                d.seen.forget_before(ts - self.late_after);
                d.owed = ts;
            }
        }
        let k = slot(ts, self.width); // O5
        match d.windows.iter_mut().rev().find(|w| w.0 == k) {
            Some(w) => w.1 += 1,
            None => d.windows.push((k, 1)),
        }
        if self.litellm {
            // LC2 on the publisher's success counter
            let gw = line.gateway.unwrap_or_default();
            let pod = match d.pods.iter().position(|p| p.gateway == gw) {
                Some(p) => &mut d.pods[p],
                None => {
                    d.pods.push(Pod { gateway: gw.to_vec(), s_anchor: f64::NEG_INFINITY, s_count: 0 });
                    d.pods.last_mut().unwrap()
                }
            };
            if ts >= pod.s_anchor + self.ttl {
                pod.s_anchor = ts;
                pod.s_count = 1;
            } else {
                pod.s_count += 1;
            }
        }
        d.counted += 1;
        self.tallied += 1;
        true
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
            index: HashMap::new(),
            deps: Vec::new(),
            tallied: 0,
        }
    }

    /// Scan `data` from byte `pos` (line number `line` of the block, from 0), tallying what this side owns,
    /// up to the first line it does not: returns (next pos, next line, that line's number, its bytes), or
    /// (len, lines, 0, None) at the end. Python decides that line before the scan goes on.
    fn scan<'py>(
        &mut self,
        py: Python<'py>,
        data: &[u8],
        pos: usize,
        line: usize,
    ) -> (usize, usize, usize, Option<Bound<'py, PyBytes>>) {
        let mut pos = pos;
        let mut lineno = line;
        while pos < data.len() {
            let end = match data[pos..].iter().position(|&b| b == b'\n') {
                Some(n) => pos + n,
                None => data.len(),
            };
            let raw = &data[pos..end];
            let here = lineno;
            pos = (end + 1).min(data.len());
            lineno += 1;
            if is_blank(raw) {
                continue;
            }
            if let Read::Success(l) = read_line(raw) {
                if let Some(&i) = self.index.get(l.deployment_id.unwrap_or_default()) {
                    if self.tally(i, &l) {
                        continue;
                    }
                }
            }
            return (pos, lineno, here, Some(PyBytes::new(py, raw)));
        }
        (data.len(), lineno, 0, None)
    }

    /// Write what this side tallied for `deployment_id` into its `DeploymentState` (`st`): the request
    /// path's hw, gc_next, window counts and publisher success counters, and `st.counted`. Python then owns
    /// the deployment until `push`. Returns the high-water mark of an L3 this side ran only on the seen ids
    /// (the caller runs `windows.discard` as of that mark), or None.
    fn pull(
        &mut self,
        py: Python<'_>,
        deployment_id: &Bound<'_, PyString>,
        st: &Bound<'_, PyAny>,
    ) -> PyResult<Option<f64>> {
        let key = key_bytes(deployment_id)?;
        let Some(&i) = self.index.get(&key) else { return Ok(None) };
        let d = &mut self.deps[i as usize];
        if d.mode == Mode::Python {
            return Ok(None);
        }
        let ps = st.getattr("request")?;
        ps.setattr("hw", d.hw)?;
        ps.setattr("gc_next", d.gc_next)?;
        if !d.windows.is_empty() {
            let windows = ps.getattr("windows")?.cast_into::<PyDict>()?;
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
        if self.litellm && !d.pods.is_empty() {
            let pods = ps.getattr("litellm")?.cast_into::<PyDict>()?;
            for p in &d.pods {
                let gw = PyString::new(py, std::str::from_utf8(&p.gateway).unwrap_or_default());
                let pod = match pods.get_item(&gw)? {
                    Some(pod) => pod,
                    None => {
                        let pod = self.pod_type.bind(py).call0()?;
                        pods.set_item(&gw, &pod)?;
                        pod
                    }
                };
                pod.setattr("s_anchor", p.s_anchor)?;
                pod.setattr("s_count", p.s_count)?;
            }
        }
        if d.counted != 0 {
            let counted: i64 = st.getattr("counted")?.extract()?;
            st.setattr("counted", counted + d.counted)?;
            d.counted = 0;
        }
        d.mode = Mode::Python;
        let owed = d.owed;
        d.owed = f64::NEG_INFINITY;
        Ok((owed > f64::NEG_INFINITY).then_some(owed))
    }

    /// Take `deployment_id` over from Python's `DeploymentState` `st` when nothing is pending on its request
    /// path (no probation, X7.2), so its plain successes are tallied here: the seen ids move into this side's
    /// store (`ps.seen` becomes a `SeenIds` view of it). Returns whether it was taken.
    fn push(slf: &Bound<'_, Self>, deployment_id: &Bound<'_, PyString>, st: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = slf.py();
        let ps = st.getattr("request")?;
        let key = key_bytes(deployment_id)?;
        let mut me = slf.borrow_mut();
        let i = me.dep_index(&key);
        if me.deps[i as usize].mode != Mode::Python {
            return Ok(true);
        }
        if ps.getattr("probation")?.is_truthy()? {
            return Ok(false);
        }
        let seen = ps.getattr("seen")?;
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
        let hw: f64 = ps.getattr("hw")?.extract()?;
        let gc_next: f64 = ps.getattr("gc_next")?.extract()?;
        let mut pods = Vec::new();
        if me.litellm {
            for (gw, pod) in ps.getattr("litellm")?.cast_into::<PyDict>()?.iter() {
                let gw = gw.cast_into::<PyString>()?;
                pods.push(Pod {
                    gateway: key_bytes(&gw)?,
                    s_anchor: pod.getattr("s_anchor")?.extract()?,
                    s_count: pod.getattr("s_count")?.extract()?,
                });
            }
        }
        let d = &mut me.deps[i as usize];
        if let Some(dict) = &absorb {
            for (k, t) in dict.iter() {
                let k = k.cast_into::<PyString>()?;
                d.seen.insert(id_hash(&key_bytes(&k)?), t.extract()?);
            }
        }
        d.hw = hw;
        d.gc_next = gc_next;
        d.pods = pods;
        d.windows.clear();
        d.owed = f64::NEG_INFINITY;
        d.mode = Mode::Owned;
        drop(me);
        if absorb.is_some() {
            ps.setattr("seen", Py::new(py, SeenIds { fast: slf.clone().unbind(), dep: i })?)?;
        }
        Ok(true)
    }

    /// Deployments whose request path is owned here (for tests and the profile).
    fn owned(&self) -> usize {
        self.deps.iter().filter(|d| d.mode != Mode::Python).count()
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
}

#[pymethods]
impl SeenIds {
    fn __contains__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>) -> PyResult<bool> {
        let h = id_hash(&key_bytes(event_id)?);
        Ok(self.with(py, |s| s.contains(h)))
    }

    fn __getitem__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>) -> PyResult<f64> {
        let h = id_hash(&key_bytes(event_id)?);
        self.with(py, |s| s.ts.get(&h).copied()).ok_or_else(|| PyKeyError::new_err(event_id.clone().unbind()))
    }

    fn __setitem__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>, ts: f64) -> PyResult<()> {
        let h = id_hash(&key_bytes(event_id)?);
        self.with(py, |s| s.insert(h, ts));
        Ok(())
    }

    fn __delitem__(&self, py: Python<'_>, event_id: &Bound<'_, PyString>) -> PyResult<()> {
        let h = id_hash(&key_bytes(event_id)?);
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
    m.add_class::<FastPath>()?;
    m.add_class::<SeenIds>()?;
    Ok(())
}
