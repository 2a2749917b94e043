//! Leases: the uuid a claim hands out, which a completion or a failure must
//! give back. A lease is laid out as a version 7 uuid (RFC 9562): its first
//! 48 bits are the claim's time in Unix milliseconds, the next 12 (after
//! the version) the fraction of that millisecond, and the remaining 62 are
//! random, as unguessable for a lease's purpose (fencing off a consumer
//! whose lease was taken over) as a version 4 uuid's 122. So whoever is
//! given a lease back knows how long its job ran, reading nothing: the
//! latency histograms (metrics) count a run from it.

use pgrx::datum::{TimestampWithTimeZone, Uuid};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const UNIX_TO_POSTGRES_US: i64 = 946_684_800_000_000;

/// A new lease for a claim at `at` (PostgreSQL microseconds; NULL: now).
/// Called by the claim statements for each job (claim_set.sql), as the
/// extension's owner; not for other roles (grants.sql).
#[pg_extern(volatile, parallel_safe)]
fn queue_lease(at: default!(Option<TimestampWithTimeZone>, "NULL")) -> Uuid {
    let at = at.map_or_else(crate::time::now_us, |t| t.into_inner());
    let mut random = [0u8; 8];
    // SAFETY: writes exactly random.len() bytes into the buffer it is
    // given, which outlives the call.
    if !unsafe { pg_sys::pg_strong_random(random.as_mut_ptr().cast(), random.len()) } {
        error!("could not generate random values for a lease");
    }
    Uuid::from_bytes(layout(at, random))
}

/// The bytes of a lease for a claim at `at_us`, with `random` bits.
fn layout(at_us: i64, random: [u8; 8]) -> [u8; 16] {
    let unix_us = (at_us + UNIX_TO_POSTGRES_US).max(0) as u64;
    let ms = unix_us / 1000;
    // The microseconds of the millisecond, in 4096ths: RFC 9562's method 3.
    let fraction = ((unix_us % 1000) * 4096 / 1000) as u16;
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    bytes[6] = 0x70 | (fraction >> 8) as u8;
    bytes[7] = fraction as u8;
    bytes[8..].copy_from_slice(&random);
    bytes[8] = 0x80 | (bytes[8] & 0x3f);
    bytes
}

/// When the claim that handed out `lease` was made (PostgreSQL
/// microseconds, to a quarter of a microsecond); None for a lease not laid
/// out so (one handed out before 0.4.0: a version 4 uuid).
pub fn claimed_at(lease: &Uuid) -> Option<i64> {
    let bytes = lease.as_bytes();
    if bytes[6] >> 4 != 7 || bytes[8] >> 6 != 2 {
        return None;
    }
    let mut ms = [0u8; 8];
    ms[2..].copy_from_slice(&bytes[..6]);
    let ms = u64::from_be_bytes(ms);
    let fraction = u64::from(u16::from_be_bytes([bytes[6] & 0x0f, bytes[7]]));
    let unix_us = ms * 1000 + (fraction * 1000).div_ceil(4096);
    Some(unix_us as i64 - UNIX_TO_POSTGRES_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(at_us: i64, random: [u8; 8]) -> Option<i64> {
        claimed_at(&Uuid::from_bytes(layout(at_us, random)))
    }

    #[test]
    fn a_lease_gives_back_its_claims_time_to_the_microsecond() {
        for at in [0, 1, 999, 1_000, 123_456_789, 851_234_567_890_123] {
            assert_eq!(decoded(at, [0xff; 8]), Some(at), "{at}");
            assert_eq!(decoded(at, [0; 8]), Some(at), "{at}");
        }
        for us in 0..2_000 {
            let at = 851_234_567_000_000 + us;
            assert_eq!(decoded(at, [7; 8]), Some(at), "{at}");
        }
    }

    #[test]
    fn a_lease_is_a_version_7_uuid_with_its_random_bits() {
        let bytes = layout(851_234_567_890_123, [0xab; 8]);
        let uuid = Uuid::from_bytes(bytes).to_string();
        assert_eq!(&uuid[14..15], "7", "{uuid}");
        assert!(matches!(&uuid[19..20], "8" | "9" | "a" | "b"), "{uuid}");
        assert_eq!(&bytes[9..], &[0xab; 7]);
        assert_eq!(bytes[8] & 0x3f, 0xab & 0x3f);
    }

    #[test]
    fn a_version_4_lease_has_no_claim_time() {
        let v4 = Uuid::from_bytes([
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x4d, 0xef, 0x8a, 0, 0, 0, 0, 0, 0, 1,
        ]);
        assert_eq!(claimed_at(&v4), None);
    }
}
