//! The digest of a skill file: `sha256:` and the lowercase hex of its SHA-256.

use sha2::{Digest, Sha256};

/// The prefix of every digest this extension defines.
const PREFIX: &str = "sha256:";

/// `sha256:` and the 64 lowercase hex digits of the SHA-256 of `bytes` (for a text file, the
/// UTF-8 bytes of the text `resources/read` returns).
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(PREFIX.len() + 64);
    out.push_str(PREFIX);
    for byte in hash.iter() {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether `s` has the form of a digest: `sha256:` and 64 lowercase hex digits.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix(PREFIX).is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_sha256_in_lowercase_hex() {
        // SHA-256 of the empty string and of "abc" (FIPS 180-2 test vectors).
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_digest(&digest(b"x")));
        assert!(!is_digest("sha256:ABC"));
        assert!(!is_digest(&digest(b"x").to_uppercase()));
        assert!(!is_digest("md5:d41d8cd98f00b204e9800998ecf8427e"));
    }
}
