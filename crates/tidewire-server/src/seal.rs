//! Sealing the `requestState` a stateless server hands to its client: HMAC-SHA256 over the
//! bytes, under a key named in the token, so keys can rotate and several processes can share them.
//!
//! A sealed token is `tw1.<key id>.<payload, base64url>.<tag, base64url>`; the tag covers
//! everything before it. The payload is readable by the client (it is signed, not encrypted):
//! put nothing secret in it.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

const VERSION: &str = "tw1";

/// The keys that seal and open `requestState`: the first seals, every one opens.
///
/// Give every process of one server the same ring (the state a client got from one process may
/// come back to another). To rotate: put the new key first and keep the old one for as long as
/// state sealed with it may live (the state's lifetime, ten minutes by default), then drop it.
#[derive(Clone)]
pub struct KeyRing {
    keys: Vec<(String, Vec<u8>)>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secrets.
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("KeyRing").field("key_ids", &ids).finish()
    }
}

/// A key ring could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRingError {
    /// A key id must be 1–32 characters of `[A-Za-z0-9_-]`.
    #[error("a key id must be 1 to 32 characters of A-Z, a-z, 0-9, _ or -: {0:?}")]
    BadId(String),
    /// A key must have at least 32 bytes.
    #[error("the key {0:?} is shorter than 32 bytes")]
    ShortKey(String),
    /// Two keys share an id.
    #[error("two keys share the id {0:?}")]
    DuplicateId(String),
    /// No randomness to draw a key from.
    #[error("cannot draw a random key: {0}")]
    NoRandom(String),
}

impl KeyRing {
    /// A ring with one key, which seals and opens.
    ///
    /// # Errors
    /// When the id is not 1–32 characters of `[A-Za-z0-9_-]` or the key is shorter than 32 bytes.
    pub fn new(id: &str, key: impl AsRef<[u8]>) -> Result<Self, KeyRingError> {
        let mut ring = Self { keys: Vec::new() };
        ring.push(id, key.as_ref())?;
        Ok(ring)
    }

    /// A ring with one random key, for a single process (the default of a server).
    ///
    /// # Errors
    /// When the system has no randomness to give.
    pub fn random() -> Result<Self, KeyRingError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| KeyRingError::NoRandom(e.to_string()))?;
        Self::new("local", key)
    }

    /// A ring that seals and opens nothing (when no key could be drawn): every stateless
    /// question then fails clearly instead of being sealed with a guessable key.
    pub(crate) fn unusable() -> Self {
        Self { keys: Vec::new() }
    }

    /// Adds a key that opens state sealed earlier but seals nothing new (an older key).
    ///
    /// # Errors
    /// As [`new`](Self::new), or when the id is taken.
    pub fn also_open(mut self, id: &str, key: impl AsRef<[u8]>) -> Result<Self, KeyRingError> {
        self.push(id, key.as_ref())?;
        Ok(self)
    }

    fn push(&mut self, id: &str, key: &[u8]) -> Result<(), KeyRingError> {
        let valid = (1..=32).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(KeyRingError::BadId(id.to_owned()));
        }
        if key.len() < 32 {
            return Err(KeyRingError::ShortKey(id.to_owned()));
        }
        if self.keys.iter().any(|(known, _)| known == id) {
            return Err(KeyRingError::DuplicateId(id.to_owned()));
        }
        self.keys.push((id.to_owned(), key.to_vec()));
        Ok(())
    }

    /// Seals `payload` under the first key.
    ///
    /// # Errors
    /// Only if the key cannot be used (never for keys the ring accepted).
    pub(crate) fn seal(&self, payload: &[u8]) -> Result<String, &'static str> {
        let (id, key) = self.keys.first().ok_or("the key ring is empty")?;
        let signed = format!("{VERSION}.{id}.{}", URL_SAFE_NO_PAD.encode(payload));
        let tag = tag(key, signed.as_bytes())?.finalize().into_bytes();
        Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag)))
    }

    /// The payload of a token this ring sealed.
    ///
    /// # Errors
    /// When the token is malformed, names no key of the ring, or its tag does not match.
    pub(crate) fn open(&self, token: &str) -> Result<Vec<u8>, &'static str> {
        let (signed, tag_text) = token.rsplit_once('.').ok_or("it is not a sealed state")?;
        let mut parts = signed.splitn(3, '.');
        let (Some(VERSION), Some(id), Some(payload)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err("it is not a sealed state of this server");
        };
        let key = self
            .keys
            .iter()
            .find(|(known, _)| known == id)
            .map(|(_, key)| key)
            .ok_or("it was sealed with a key this server does not hold")?;
        let expected = URL_SAFE_NO_PAD
            .decode(tag_text)
            .map_err(|_| "its seal is malformed")?;
        tag(key, signed.as_bytes())?
            .verify_slice(&expected)
            .map_err(|_| "its seal does not match (it was altered)")?;
        URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| "its payload is malformed")
    }
}

/// The MAC of `data` under `key` (HMAC takes a key of any length, so this cannot fail in
/// practice; it is still an error, not a panic).
fn tag(key: &[u8], data: &[u8]) -> Result<Hmac<Sha256>, &'static str> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).map_err(|_| "unusable key")?;
    mac.update(data);
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(id: &str, byte: u8) -> KeyRing {
        KeyRing::new(id, [byte; 32]).expect("valid key")
    }

    #[test]
    fn a_sealed_payload_opens_and_any_change_is_refused() {
        let ring = ring("k1", 7);
        let token = ring.seal(b"{\"a\":1}").expect("seals");
        assert_eq!(ring.open(&token).expect("opens"), b"{\"a\":1}");
        assert!(ring.open(&format!("{token}-TAMPERED")).is_err());
        let (signed, _) = token.rsplit_once('.').expect("dot");
        let forged = format!("{signed}.{}", URL_SAFE_NO_PAD.encode([0u8; 32]));
        assert!(ring.open(&forged).is_err());
        let other_payload = token.replace(
            &URL_SAFE_NO_PAD.encode(b"{\"a\":1}"),
            &URL_SAFE_NO_PAD.encode(b"{\"a\":2}"),
        );
        assert!(ring.open(&other_payload).is_err());
        assert!(ring.open("garbage").is_err());
        assert!(ring.open("").is_err());
    }

    #[test]
    fn rotation_opens_old_state_and_seals_with_the_new_key() {
        let old = ring("old", 1);
        let sealed_before = old.seal(b"x").expect("seals");
        let rotated = KeyRing::new("new", [2u8; 32])
            .and_then(|r| r.also_open("old", [1u8; 32]))
            .expect("ring");
        assert_eq!(rotated.open(&sealed_before).expect("old opens"), b"x");
        let sealed_after = rotated.seal(b"y").expect("seals");
        assert!(sealed_after.starts_with("tw1.new."));
        // A process that never had the new key refuses it; one with another secret too.
        assert!(old.open(&sealed_after).is_err());
        assert!(ring("new", 3).open(&sealed_after).is_err());
    }

    #[test]
    fn bad_keys_are_refused_and_secrets_never_printed() {
        assert_eq!(
            KeyRing::new("k", [0u8; 16]).err(),
            Some(KeyRingError::ShortKey("k".into()))
        );
        assert!(KeyRing::new("a.b", [0u8; 32]).is_err());
        assert!(ring("k", 1).also_open("k", [2u8; 32]).is_err());
        let shown = format!("{:?}", KeyRing::new("k", [0x41u8; 32]).expect("ring"));
        assert!(!shown.contains("AAAA") && !shown.contains("65"), "{shown}");
    }
}
