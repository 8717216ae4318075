//! [`shared_key_ring`]: one sealing key for every replica of a server.

use tidewire_server::KeyRing;

use crate::{Redis, RedisError};

/// The key ring every replica of the server seals a stateless request's `requestState` with,
/// so a retry may land on any of them. The first replica to ask draws a random 32-byte key and
/// stores it (`SET … NX`: if two ask at once, both get the one stored first); the others read
/// it. Whoever can read this Redis can forge `requestState`: keep Redis private.
///
/// # Errors
/// [`RedisError::Redis`] when Redis cannot be reached; [`RedisError::Corrupt`] when the key
/// stored is not one tidewire wrote; [`RedisError::Key`] when no key can be drawn.
pub async fn shared_key_ring(redis: &Redis) -> Result<KeyRing, RedisError> {
    let name = redis.key("state-key");
    let mut drawn = [0u8; 32];
    getrandom::fill(&mut drawn).map_err(|e| RedisError::Key(e.to_string()))?;
    let hex: String = drawn.iter().map(|b| format!("{b:02x}")).collect();
    let mut connection = redis.connection();
    let _: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg(&hex)
        .arg("NX")
        .query_async(&mut connection)
        .await?;
    let stored: String = redis::cmd("GET")
        .arg(&name)
        .query_async(&mut connection)
        .await?;
    let corrupt = |reason: &str| RedisError::Corrupt {
        key: name.clone(),
        reason: reason.to_owned(),
    };
    if stored.len() != 64 || !stored.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(corrupt("not 32 bytes in hex"));
    }
    let key: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&stored[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| corrupt("not hex"))?;
    KeyRing::new("shared", key).map_err(|e| RedisError::Key(e.to_string()))
}
