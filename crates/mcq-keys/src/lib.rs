//! API keys of mcq.
//!
//! A key reads `mcq_<id>_<secret>`: the id (64 random bits, hex) is
//! public — it names the key in `mcq keys list` and in the access log —
//! and the secret (256 random bits from the operating system, hex) is
//! shown once, when the key is made. The database keeps the SHA-256 of the
//! secret only: a secret this random needs no slow password hash, since
//! no one can guess it, and a stolen table of hashes opens nothing.
//! A presented secret is checked against the stored hash in constant time.

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// What every key starts with, so that a leaked key is recognisable
/// (secret scanners, logs).
pub const PREFIX: &str = "mcq_";

/// Random bytes of a key's id.
const ID_BYTES: usize = 8;
/// Random bytes of a key's secret.
const SECRET_BYTES: usize = 32;

/// Why a presented key is refused before the database is asked.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// Not of the form `mcq_<id>_<secret>`.
    #[error("not an mcq API key (expected mcq_<id>_<secret>)")]
    Malformed,
    /// The operating system's random source failed.
    #[error("no random bytes from the operating system: {0}")]
    Random(String),
}

/// A key just made: its public id, the whole key (to show once) and the
/// hash to store.
#[derive(Debug, Clone)]
pub struct MintedKey {
    /// Public id.
    pub id: String,
    /// The whole key, `mcq_<id>_<secret>`; never stored.
    pub key: String,
    /// SHA-256 of the secret, to store.
    pub secret_hash: Vec<u8>,
}

/// Makes a new key from the operating system's random source.
pub fn mint() -> Result<MintedKey, KeyError> {
    let mut id = [0u8; ID_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::fill(&mut id).map_err(|e| KeyError::Random(e.to_string()))?;
    getrandom::fill(&mut secret).map_err(|e| KeyError::Random(e.to_string()))?;
    let id = hex(&id);
    let secret = hex(&secret);
    Ok(MintedKey {
        key: format!("{PREFIX}{id}_{secret}"),
        secret_hash: hash(&secret),
        id,
    })
}

/// A presented key split into its id and secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresentedKey<'a> {
    /// Public id, to look the key up by.
    pub id: &'a str,
    /// Secret, to check against the stored hash.
    pub secret: &'a str,
}

/// Splits `key` into id and secret, checking only their shape.
pub fn parse(key: &str) -> Result<PresentedKey<'_>, KeyError> {
    let rest = key.strip_prefix(PREFIX).ok_or(KeyError::Malformed)?;
    let (id, secret) = rest.split_once('_').ok_or(KeyError::Malformed)?;
    let hex_of = |text: &str, bytes: usize| {
        text.len() == 2 * bytes && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if !hex_of(id, ID_BYTES) || !hex_of(secret, SECRET_BYTES) {
        return Err(KeyError::Malformed);
    }
    Ok(PresentedKey { id, secret })
}

/// Whether `secret` hashes to `stored`, compared in constant time.
pub fn verify(secret: &str, stored: &[u8]) -> bool {
    bool::from(hash(secret).as_slice().ct_eq(stored))
}

/// What the database keeps of a secret.
fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Lowercase hex.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_key_parses_and_verifies_against_its_hash_only() {
        let minted = mint().unwrap();
        let presented = parse(&minted.key).unwrap();
        assert_eq!(presented.id, minted.id);
        assert!(verify(presented.secret, &minted.secret_hash));
        let other = mint().unwrap();
        assert_ne!(other.id, minted.id);
        assert!(!verify(
            parse(&other.key).unwrap().secret,
            &minted.secret_hash
        ));
        assert!(!verify(presented.secret, &[]));
        assert_eq!(minted.secret_hash.len(), 32);
        assert!(!minted.key.contains(&hex(&minted.secret_hash)));
    }

    #[test]
    fn keys_of_the_wrong_shape_are_refused() {
        let minted = mint().unwrap();
        let secret = parse(&minted.key).unwrap().secret.to_owned();
        for bad in [
            String::new(),
            "mcq_".into(),
            format!("mcq_{}", minted.id),
            format!("xyz_{}_{secret}", minted.id),
            format!("mcq_{}_{}", minted.id, &secret[1..]),
            format!("mcq_{}_{}", minted.id, secret.to_uppercase()),
            format!("mcq_{}x_{secret}", minted.id),
            format!("{} ", minted.key),
        ] {
            assert_eq!(parse(&bad), Err(KeyError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn hex_is_lowercase_and_two_digits_a_byte() {
        assert_eq!(hex(&[0, 15, 16, 255]), "000f10ff");
    }
}
