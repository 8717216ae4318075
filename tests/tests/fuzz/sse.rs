//! Target: SSE lines (ours) feeding eventsource-stream (the parser we depend on).

use super::generators::*;
use super::*;

/// One line of an event stream.
#[derive(Debug, Clone)]
pub(crate) enum Field {
    /// `data: value`, or `data:value` without the space.
    Data {
        value: String,
        space: bool,
    },
    /// `data` alone: an empty data line.
    BareData,
    Id(String),
    Event(String),
    Retry(String),
    Comment(String),
    /// A field the parser ignores (never starting with U+FEFF).
    Unknown(&'static str, String),
}

impl Field {
    fn line(&self) -> String {
        match self {
            Self::Data { value, space: true } => format!("data: {value}"),
            Self::Data {
                value,
                space: false,
            } => format!("data:{value}"),
            Self::BareData => "data".to_owned(),
            Self::Id(value) => format!("id: {value}"),
            Self::Event(value) => format!("event: {value}"),
            Self::Retry(value) => format!("retry: {value}"),
            Self::Comment(value) => format!(":{value}"),
            Self::Unknown(name, value) => format!("{name}: {value}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Lf,
    Cr,
    CrLf,
}

impl Ending {
    fn text(self) -> &'static str {
        match self {
            Self::Lf => "\n",
            Self::Cr => "\r",
            Self::CrLf => "\r\n",
        }
    }
}

/// How a body is cut into chunks.
#[derive(Debug, Clone)]
pub(crate) enum Chunking {
    Whole,
    EveryByte,
    Cuts(Vec<Index>),
}

impl Chunking {
    fn split<'a>(&self, bytes: &'a [u8]) -> Vec<&'a [u8]> {
        match self {
            Self::Whole => vec![bytes],
            // One byte at a time, for bodies small enough that this stays quick.
            Self::EveryByte if bytes.len() <= 16 * 1024 => bytes.chunks(1).collect(),
            Self::EveryByte => bytes.chunks(7).collect(),
            Self::Cuts(cuts) => chunks(bytes, cuts),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SseCase {
    /// Events, each followed by a blank line.
    events: Vec<Vec<Field>>,
    /// An unfinished event at the end: never dispatched.
    tail: Vec<Field>,
    /// The tail's last line has no line end either.
    tail_unended: bool,
    /// The line ends, in turn.
    endings: Vec<Ending>,
    bom: bool,
    /// Bytes inserted after serializing (junk: invalid UTF-8, stray CR/LF, BOMs).
    junk: Vec<(Index, Vec<u8>)>,
    a: Chunking,
    b: Chunking,
}

pub(crate) const UNKNOWN_FIELDS: &[&str] = &[
    "foo", "Data", "ID", "data ", " data", "dat", "event2", "x-y", "été", "retry2",
];
pub(crate) const FIELD_CHARS: &[char] =
    &['\u{FEFF}', '\0', ':', ' ', 'é', '😀', '\u{2028}', '\u{85}'];
pub(crate) const SSE_VALUES: &[&str] = &[
    "",
    " ",
    "  two spaces",
    "{}",
    "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
    ":",
    "data: nested",
    "\u{FEFF}",
    "\u{FEFF}x",
    "\0",
    "id\0with nul",
];
pub(crate) const JUNK: &[&[u8]] = &[
    b"\r",
    b"\n",
    b"\r\n",
    b"\xFF",
    b"\xC3",
    b"\xE2\x82",
    b"\xEF\xBB\xBF",
    b"\xEF\xBB",
    b"\xF0\x9F\x98",
    b":",
    b"\0",
];

pub(crate) fn field_char() -> BoxedStrategy<char> {
    prop_oneof![
        4 => proptest::char::range(' ', '~'),
        2 => any::<char>().prop_map(|c| if c == '\r' || c == '\n' { ' ' } else { c }),
        1 => select(FIELD_CHARS),
    ]
    .boxed()
}

/// A field value: any text without CR or LF, sometimes 64 KB long.
pub(crate) fn field_value() -> BoxedStrategy<String> {
    prop_oneof![
        8 => vec(field_char(), 0..24).prop_map(String::from_iter),
        2 => select(SSE_VALUES).prop_map(str::to_owned),
        1 => huge_text(65_536),
    ]
    .boxed()
}

pub(crate) fn field() -> BoxedStrategy<Field> {
    let retry = prop_oneof![
        2 => regex("[0-9]{1,6}"),
        1 => Just("18446744073709551616".to_owned()),
        1 => field_value(),
    ];
    prop_oneof![
        6 => (field_value(), proptest::bool::weighted(0.8))
            .prop_map(|(value, space)| Field::Data { value, space }),
        1 => Just(Field::BareData),
        2 => field_value().prop_map(Field::Id),
        2 => field_value().prop_map(Field::Event),
        1 => retry.prop_map(Field::Retry),
        1 => field_value().prop_map(Field::Comment),
        1 => (select(UNKNOWN_FIELDS), field_value())
            .prop_map(|(name, value)| Field::Unknown(name, value)),
    ]
    .boxed()
}

pub(crate) fn chunking() -> BoxedStrategy<Chunking> {
    prop_oneof![
        1 => Just(Chunking::Whole),
        1 => Just(Chunking::EveryByte),
        4 => vec(any::<Index>(), 1..12).prop_map(Chunking::Cuts),
    ]
    .boxed()
}

pub(crate) fn sse_case() -> impl Strategy<Value = SseCase> {
    let ending = prop_oneof![Just(Ending::Lf), Just(Ending::Cr), Just(Ending::CrLf)];
    let junk_bytes = prop_oneof![
        3 => select(JUNK).prop_map(<[u8]>::to_vec),
        1 => vec(any::<u8>(), 1..4),
    ];
    let junk = prop_oneof![
        3 => Just(Vec::<(Index, Vec<u8>)>::new()),
        2 => vec((any::<Index>(), junk_bytes), 1..4),
    ];
    (
        vec(vec(field(), 0..5), 0..6),
        vec(field(), 0..3),
        any::<bool>(),
        vec(ending, 1..6),
        any::<bool>(),
        junk,
        chunking(),
        chunking(),
    )
        .prop_map(
            |(events, tail, tail_unended, endings, bom, junk, a, b)| SseCase {
                events,
                tail,
                tail_unended,
                endings,
                bom,
                junk,
                a,
                b,
            },
        )
}

/// The body, and the text `SseLines` should hand over for it when no junk is inserted: every
/// complete line, ending with one LF.
pub(crate) fn serialize(case: &SseCase) -> (Vec<u8>, String) {
    let mut lines: Vec<String> = Vec::new();
    for event in &case.events {
        lines.extend(event.iter().map(Field::line));
        lines.push(String::new());
    }
    lines.extend(case.tail.iter().map(Field::line));
    let mut body = Vec::new();
    if case.bom {
        body.extend_from_slice(b"\xEF\xBB\xBF");
    }
    let mut expected = String::new();
    let mut previous = None;
    let count = lines.len();
    for (n, line) in lines.iter().enumerate() {
        body.extend_from_slice(line.as_bytes());
        if n + 1 == count && !case.tail.is_empty() && case.tail_unended {
            break;
        }
        let mut ending = case.endings[n % case.endings.len()];
        // A CR then an empty line ended by LF would be one CRLF.
        if line.is_empty() && previous == Some(Ending::Cr) && ending == Ending::Lf {
            ending = Ending::Cr;
        }
        body.extend_from_slice(ending.text().as_bytes());
        expected.push_str(line);
        expected.push('\n');
        previous = Some(ending);
    }
    for (at, junk) in &case.junk {
        let at = at.index(body.len() + 1);
        let tail = body.split_off(at);
        body.extend_from_slice(junk);
        body.extend_from_slice(&tail);
    }
    (body, expected)
}

/// The events the parser dispatches for `events`, as (type, data, id): those with at least one
/// data line; the id is the last one set so far (without NUL), in any event.
pub(crate) fn expected_events(events: &[Vec<Field>]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut last_id = String::new();
    for event in events {
        let mut data: Option<String> = None;
        let mut kind = String::new();
        for field in event {
            let line = match field {
                Field::Data { value, space: true } => Some(value.as_str()),
                Field::Data {
                    value,
                    space: false,
                } => Some(value.strip_prefix(' ').unwrap_or(value)),
                Field::BareData => Some(""),
                Field::Id(value) => {
                    if !value.contains('\0') {
                        last_id.clone_from(value);
                    }
                    None
                }
                Field::Event(value) => {
                    kind.clone_from(value);
                    None
                }
                Field::Retry(_) | Field::Comment(_) | Field::Unknown(..) => None,
            };
            if let Some(line) = line {
                data = Some(match data.take() {
                    Some(mut data) => {
                        data.push('\n');
                        data.push_str(line);
                        data
                    }
                    None => line.to_owned(),
                });
            }
        }
        if let Some(data) = data {
            let kind = if kind.is_empty() {
                "message".to_owned()
            } else {
                kind
            };
            out.push((kind, data, last_id.clone()));
        }
    }
    out
}

pub(crate) fn sse_lines(body: &[u8], chunking: &Chunking) -> Vec<Bytes> {
    let mut decoder = SseLines::default();
    let mut lines = Vec::new();
    for chunk in chunking.split(body) {
        lines.extend(decoder.feed(Bytes::copy_from_slice(chunk)));
    }
    lines
}

/// What `SseLines` promises of every line.
pub(crate) fn check_line(line: &Bytes) -> Result<(), TestCaseError> {
    prop_assert!(line.ends_with(b"\n"), "a line without its LF: {line:?}");
    prop_assert!(
        !line[..line.len() - 1].contains(&b'\n') && !line.contains(&b'\r'),
        "a line with another line end in it: {line:?}"
    );
    prop_assert!(
        std::str::from_utf8(line).is_ok(),
        "a line that is not UTF-8: {line:?}"
    );
    prop_assert!(
        !line.starts_with(b"\xEF\xBB\xBF"),
        "a line that starts with U+FEFF: {line:?}"
    );
    Ok(())
}

pub(crate) type Parsed = Vec<Result<Event, EventStreamError<Infallible>>>;

async fn parse_events(lines: Vec<Bytes>) -> Parsed {
    futures::stream::iter(lines.into_iter().map(Ok::<Bytes, Infallible>))
        .eventsource()
        .collect()
        .await
}

pub(crate) fn check_sse(
    runtime: &tokio::runtime::Runtime,
    case: &SseCase,
) -> Result<(), TestCaseError> {
    let (body, expected_text) = serialize(case);
    let lines = sse_lines(&body, &case.a);
    let other = sse_lines(&body, &case.b);
    for line in lines.iter().chain(&other) {
        check_line(line)?;
    }
    // The same lines (so the same events) whatever the chunking.
    prop_assert_eq!(&lines, &other, "the lines depend on the chunking");

    let parsed = within(runtime, WAIT, parse_events(lines.clone()))
        .map_err(|_| fail(format!("the parser did not finish within {WAIT:?}")))?;
    let mut events = Vec::with_capacity(parsed.len());
    for item in parsed {
        let event = item.map_err(|e| fail(format!("the parser refused a line: {e:?}")))?;
        events.push((event.event, event.data, event.id));
    }

    if case.junk.is_empty() {
        let text: Vec<u8> = lines.iter().flat_map(|line| line.iter().copied()).collect();
        prop_assert_eq!(
            String::from_utf8_lossy(&text),
            expected_text.as_str(),
            "SseLines changed the lines"
        );
        prop_assert_eq!(events, expected_events(&case.events));
    }
    Ok(())
}

#[test]
fn sse() {
    let runtime = fuzz::runtime("sse");
    fuzz::run("sse", sse_case(), |case| check_sse(&runtime, &case));
}
