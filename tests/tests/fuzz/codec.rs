//! Target: the codec and JSON-RPC decode.

use super::generators::*;
use super::*;

/// The small limit the size checks use.
pub(crate) const SMALL_LIMIT: usize = 4096;

pub(crate) const LINE_ENDS: &[&str] = &["\n", "\r\n", "\n\n", " \n", "\r\n\r\n", "\r", ""];

/// Messages checked one by one, then as a stream of lines through `LineCodec`.
#[derive(Debug, Clone)]
pub(crate) struct CodecCase {
    input: Input,
    more: Vec<Input>,
    /// What follows each input in the stream, in turn.
    ends: Vec<&'static str>,
    /// Where the stream is cut into reads.
    cuts: Vec<Index>,
}

/// The member names of a JSON object, duplicates kept, values skipped.
pub(crate) struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeysVisitor;
        impl<'de> Visitor<'de> for KeysVisitor {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        deserializer.deserialize_map(KeysVisitor)
    }
}

/// Whether the object in `bytes` names one of the members a typed pass reads twice (such an
/// object is refused as a whole: serde reports the duplicate, and no id is read).
pub(crate) fn has_duplicate_known_key(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Keys>(bytes).is_ok_and(|Keys(keys)| {
        KNOWN_KEYS
            .iter()
            .any(|known| keys.iter().filter(|key| key.as_str() == *known).count() > 1)
    })
}

/// The id and code of the error answer a decode failure carries.
pub(crate) fn answer(error: &TransportError) -> Option<(Option<RequestId>, i64)> {
    let response = error.error_response()?;
    let code = response.outcome.as_ref().err()?.code;
    Some((response.id.clone(), code))
}

pub(crate) fn same_outcome(
    a: &Result<Message, TransportError>,
    b: &Result<Message, TransportError>,
) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => a == b,
        (Err(a), Err(b)) => {
            a.is_malformed() == b.is_malformed()
                && a.is_too_large() == b.is_too_large()
                && a.error_response() == b.error_response()
        }
        _ => false,
    }
}

/// JSON equality with floats compared to a few ULPs (serde_json's default float parsing is not
/// guaranteed to be exact).
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y
                || match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => {
                        let diff = (x - y).abs();
                        diff <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
                            || diff < f64::MIN_POSITIVE
                    }
                    _ => false,
                }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| same_json(x, y)))
        }
        _ => a == b,
    }
}

pub(crate) fn to_json(message: &Message) -> Value {
    serde_json::to_value(message).expect("a message is JSON")
}

/// `Message::from_slice` and `Codec::decode` on one message.
pub(crate) fn check_decode(bytes: &[u8]) -> Result<(), TestCaseError> {
    let codec = Codec::default();
    let parsed = Message::from_slice(bytes);
    let decoded = codec.decode(bytes);

    // The codec answers exactly what the decode found.
    let consistent = match (&parsed, &decoded) {
        (Ok(a), Ok(b)) => a == b,
        (Err(DecodeFailure::Syntax(_)), Err(e)) => answer(e) == Some((None, -32700)),
        (Err(DecodeFailure::Invalid(invalid)), Err(e)) => {
            answer(e) == invalid.answerable.then(|| (invalid.id.clone(), -32600))
        }
        _ => false,
    };
    prop_assert!(
        consistent,
        "from_slice gave {parsed:?} but the codec {decoded:?}"
    );

    // Bytes that are not JSON at all (by serde_json's most lenient pass) get -32700.
    if let Err(e) = serde_json::from_slice::<IgnoredAny>(bytes)
        && (e.is_syntax() || e.is_eof())
    {
        let got = decoded.as_ref().err().and_then(answer);
        prop_assert_eq!(
            got,
            Some((None, -32700)),
            "bytes that are not JSON ({}) must be answered with -32700; the codec gave {:?}",
            e,
            decoded
        );
    }

    if let Ok(message) = &parsed {
        // Only a JSON object is a message.
        let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
        prop_assert_eq!(
            first,
            Some(b'{'),
            "{:?} was decoded from bytes that are no JSON object",
            message
        );
        // Encoding it again gives the same message, within the limit or refused.
        let encoded = codec
            .encode(message)
            .map_err(|e| fail(format!("{message:?} does not encode: {e}")))?;
        prop_assert!(
            !encoded.contains(&b'\n'),
            "the encoding holds a raw newline"
        );
        let again = codec
            .decode(&encoded)
            .map_err(|e| fail(format!("the encoding of {message:?} does not decode: {e}")))?;
        prop_assert!(
            same_json(&to_json(message), &to_json(&again)),
            "{message:?} came back as {again:?}"
        );
        match Codec::new(SMALL_LIMIT).encode(message) {
            Ok(small) => prop_assert!(encoded.len() <= SMALL_LIMIT && small == encoded),
            Err(e) => prop_assert!(encoded.len() > SMALL_LIMIT && e.is_too_large(), "{e}"),
        }
    }

    // On a JSON object, decoding the bytes and classifying the parsed value agree (unless a
    // member the typed pass reads is duplicated: then the bytes are refused as a whole).
    if let Ok(object @ Value::Object(_)) = serde_json::from_slice::<Value>(bytes)
        && !has_duplicate_known_key(bytes)
    {
        let via_value = Message::from_value(object);
        let same = match (&parsed, &via_value) {
            (Ok(a), Ok(b)) => a == b,
            (Err(DecodeFailure::Invalid(a)), Err(b)) => a == b,
            _ => false,
        };
        prop_assert!(same, "from_slice gave {parsed:?}, from_value {via_value:?}");
    }
    Ok(())
}

/// `Message::from_value` on a generated value: a readable id is carried by whatever comes out.
pub(crate) fn check_from_value(value: &Value) -> Result<(), TestCaseError> {
    let Some(object) = value.as_object() else {
        return Ok(());
    };
    let Some(id) = object.get("id").and_then(RequestId::from_json) else {
        return Ok(());
    };
    let carried = match Message::from_value(value.clone()) {
        Ok(Message::Request(request)) => Some(request.id),
        Ok(Message::Response(response)) => response.id,
        Ok(Message::Notification(_)) => None,
        Err(invalid) => invalid.id,
    };
    prop_assert_eq!(carried, Some(id));
    Ok(())
}

/// A codec with a small limit refuses what exceeds it, and decodes the rest as the default one.
pub(crate) fn check_limit(bytes: &[u8]) -> Result<(), TestCaseError> {
    let small = Codec::new(SMALL_LIMIT).decode(bytes);
    if bytes.len() > SMALL_LIMIT {
        prop_assert!(
            small.as_ref().is_err_and(TransportError::is_too_large),
            "{} bytes over a limit of {SMALL_LIMIT} gave {small:?}",
            bytes.len()
        );
        prop_assert_eq!(small.as_ref().err().and_then(answer), Some((None, -32600)));
    } else {
        let full = Codec::default().decode(bytes);
        prop_assert!(same_outcome(&small, &full), "{small:?} vs {full:?}");
    }
    Ok(())
}

/// What `LineCodec` should yield for one line.
#[derive(Debug)]
pub(crate) enum Expect {
    TooLarge,
    Decoded(Result<Message, TransportError>),
}

pub(crate) fn blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

pub(crate) fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `stream` without the lines whose fate depends on how reads cut them: a line longer than the
/// limit only because of its CR, or a blank one. (Arriving whole, such a line is decoded or
/// skipped; arriving in parts, it is refused as too large once the buffer passes the limit.)
pub(crate) fn without_ambiguous_lines(stream: &[u8], limit: usize) -> Vec<u8> {
    let mut pieces: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    let last = pieces.pop().unwrap_or_default();
    let mut out = Vec::with_capacity(stream.len());
    for line in pieces {
        let body = strip_cr(line);
        let ambiguous = line.len() > limit && (body.len() <= limit || blank(body));
        if !ambiguous {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out.extend_from_slice(last);
    out
}

/// The model of `LineCodec`: one item per line that is not blank (a trailing CR dropped), too
/// large past the limit; a last line without its newline is decoded as it is, or dropped when
/// over the limit.
pub(crate) fn expected_lines(stream: &[u8], codec: Codec) -> Vec<Expect> {
    let limit = codec.max_message_size();
    let mut pieces: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    let last = pieces.pop().unwrap_or_default();
    let mut out = Vec::new();
    for line in pieces {
        let body = strip_cr(line);
        if line.len() > limit {
            out.push(Expect::TooLarge);
        } else if !blank(body) {
            out.push(Expect::Decoded(codec.decode(body)));
        }
    }
    if last.len() <= limit && !blank(last) {
        out.push(Expect::Decoded(codec.decode(last)));
    }
    out
}

pub(crate) fn decode_stream(
    stream: &[u8],
    cuts: &[Index],
    codec: Codec,
) -> Result<Vec<Result<Message, TransportError>>, TestCaseError> {
    let mut decoder = LineCodec::new(codec);
    let mut buffer = BytesMut::new();
    let mut items = Vec::new();
    for chunk in chunks(stream, cuts) {
        buffer.extend_from_slice(chunk);
        while let Some(item) = decoder
            .decode(&mut buffer)
            .map_err(|e| fail(format!("LineCodec failed on content: {e}")))?
        {
            items.push(item);
        }
    }
    while let Some(item) = decoder
        .decode_eof(&mut buffer)
        .map_err(|e| fail(format!("LineCodec failed at the end: {e}")))?
    {
        items.push(item);
    }
    Ok(items)
}

/// `LineCodec` over a stream of several inputs, cut anywhere, against its model.
pub(crate) fn check_lines(case: &CodecCase) -> Result<(), TestCaseError> {
    let codec = Codec::new(SMALL_LIMIT);
    let mut stream = Vec::new();
    for (n, input) in std::iter::once(&case.input).chain(&case.more).enumerate() {
        stream.extend_from_slice(&input.bytes());
        stream.extend_from_slice(case.ends[n % case.ends.len()].as_bytes());
    }
    let stream = without_ambiguous_lines(&stream, SMALL_LIMIT);
    let expected = expected_lines(&stream, codec);
    let items = decode_stream(&stream, &case.cuts, codec)?;
    prop_assert_eq!(
        items.len(),
        expected.len(),
        "LineCodec yielded {:?}, the model {:?}",
        items,
        expected
    );
    for (n, (got, want)) in items.iter().zip(&expected).enumerate() {
        let same = match (got, want) {
            (Err(e), Expect::TooLarge) => e.is_too_large(),
            (got, Expect::Decoded(want)) => same_outcome(got, want),
            (Ok(_), Expect::TooLarge) => false,
        };
        prop_assert!(
            same,
            "line {n}: LineCodec yielded {got:?}, the model {want:?}"
        );
    }
    Ok(())
}

#[test]
fn codec() {
    let strategy = (
        codec_input(),
        vec(codec_input(), 0..3),
        vec(select(LINE_ENDS), 1..5),
        vec(any::<Index>(), 0..6),
    )
        .prop_map(|(input, more, ends, cuts)| CodecCase {
            input,
            more,
            ends,
            cuts,
        });
    fuzz::run("codec", strategy, |case| {
        for input in std::iter::once(&case.input).chain(&case.more) {
            let bytes = input.bytes();
            check_decode(&bytes)?;
            if let Some(value) = input.value() {
                check_from_value(value)?;
            }
            check_limit(&bytes)?;
        }
        check_lines(&case)
    });
}
