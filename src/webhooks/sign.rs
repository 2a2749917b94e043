//! The Standard Webhooks signature: `v1,` and the base64 HMAC-SHA256, keyed
//! with the secret's decoded bytes, of `<webhook-id>.<webhook-timestamp>.<body>`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A secret's key bytes: `whsec_` and the base64 of 24 to 64 bytes. The
/// error says what is wrong, never what the secret is.
pub fn key_of(secret: &str) -> Result<Vec<u8>, &'static str> {
    let Some(encoded) = secret.strip_prefix("whsec_") else {
        return Err("it must start with whsec_");
    };
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| "what follows whsec_ must be base64")?;
    if !(24..=64).contains(&key.len()) {
        return Err("it must encode 24 to 64 bytes");
    }
    Ok(key)
}

/// The `webhook-signature` header of one request.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference
    /// libraries (their test suites sign this message with this secret).
    #[test]
    fn the_specification_example_signs_alike() {
        let key = key_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            signature(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn bad_secrets_are_refused_without_showing_them() {
        assert!(key_of("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(key_of("whsec_not base64!").is_err());
        assert!(key_of("whsec_c2hvcnQ=").is_err()); // 5 bytes
        assert_eq!(
            key_of("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
                .unwrap()
                .len(),
            24
        );
    }
}
