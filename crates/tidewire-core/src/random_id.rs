//! [`random_id`]: the ids tidewire draws for sessions and tasks.

/// A new id: 128 random bits as 32 hex digits (visible ASCII, as every transport requires of a
/// session id); `None` when the system has no randomness to give.
pub fn random_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_differ() {
        let id = random_id().expect("randomness");
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(random_id(), Some(id));
    }
}
