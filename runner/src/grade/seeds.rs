//! Seeds of the hidden tests: HMAC-SHA256 of the student's and the test's names under a secret
//! only the instructor holds. The secret stays in the grading process: a child that runs a
//! submission receives the derived seeds, never the secret.

use anyhow::{bail, Context, Result};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::path::{Path, PathBuf};

/// The environment variable that may hold the secret instead of a file.
pub const SECRET_ENV: &str = "WORKBOOK_GRADE_SECRET";

/// Shortest secret accepted: a guessable secret makes hidden tests public.
pub const MIN_SECRET_BYTES: usize = 16;

/// The instructor's secret.
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Result<Secret> {
        let trimmed = bytes.trim_ascii().to_vec();
        if trimmed.len() < MIN_SECRET_BYTES {
            bail!(
                "the grading secret must be at least {MIN_SECRET_BYTES} bytes (it has {}); e.g. `head -c 32 /dev/urandom | base64 > secret.txt`",
                trimmed.len()
            );
        }
        Ok(Secret(trimmed))
    }

    /// From `--secret-file`, else from the environment; `None` if neither is set.
    /// `submissions` are refused as the secret's location: a secret a student can read is none.
    pub fn load(file: Option<&Path>, submissions: &[PathBuf]) -> Result<Option<Secret>> {
        if let Some(path) = file {
            let canon = path
                .canonicalize()
                .with_context(|| format!("cannot read the secret file {}", path.display()))?;
            for s in submissions {
                if let Ok(sub) = s.canonicalize() {
                    if canon.starts_with(&sub) {
                        bail!(
                            "the secret file {} lies inside the submission {}: keep it where no submission can be",
                            path.display(),
                            s.display()
                        );
                    }
                }
            }
            let bytes = super::userfile::read(
                &canon,
                super::userfile::MAX_SECRET_BYTES,
                "the secret file",
            )?;
            return Secret::new(bytes).map(Some);
        }
        match std::env::var_os(SECRET_ENV) {
            Some(v) => Secret::new(v.into_encoded_bytes()).map(Some),
            None => Ok(None),
        }
    }

    /// The seed of one use (`purpose`: an input set, the refreshed rows, the decoy) of one
    /// test for one student.
    pub fn seed(&self, student: &str, test: &str, purpose: &str, index: u64) -> u64 {
        derive(&self.0, student, test, purpose, index)
    }
}

/// HMAC-SHA256 over the length-prefixed fields, first 8 bytes little-endian. Length prefixes
/// keep ("ab", "c") and ("a", "bc") apart.
fn derive(key: &[u8], student: &str, test: &str, purpose: &str, index: u64) -> u64 {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(b"workbook-grade/v1");
    for field in [student.as_bytes(), test.as_bytes(), purpose.as_bytes()] {
        mac.update(&(field.len() as u64).to_le_bytes());
        mac.update(field);
    }
    mac.update(&index.to_le_bytes());
    let out = mac.finalize().into_bytes();
    let mut first = [0u8; 8];
    first.copy_from_slice(&out[..8]);
    u64::from_le_bytes(first)
}

/// Seeds of a public test: from the rubric's seed, the same for every student.
pub fn public_seed(rubric_seed: u64, test: &str, purpose: &str, index: u64) -> u64 {
    derive(&rubric_seed.to_le_bytes(), "", test, purpose, index)
}

/// SHA-256 of some bytes, as hex: identifies a submission or a rubric in reports.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"correct horse battery staple".to_vec()).unwrap()
    }

    #[test]
    fn seeds_depend_on_every_field_and_the_secret() {
        let s = secret();
        let base = s.seed("alice", "hidden-1", "set", 0);
        assert_eq!(base, s.seed("alice", "hidden-1", "set", 0), "deterministic");
        assert_ne!(base, s.seed("bob", "hidden-1", "set", 0));
        assert_ne!(base, s.seed("alice", "hidden-2", "set", 0));
        assert_ne!(base, s.seed("alice", "hidden-1", "decoy", 0));
        assert_ne!(base, s.seed("alice", "hidden-1", "set", 1));
        let other = Secret::new(b"another secret of enough length".to_vec()).unwrap();
        assert_ne!(base, other.seed("alice", "hidden-1", "set", 0));
        // Field boundaries are part of the message.
        assert_ne!(s.seed("ab", "c", "set", 0), s.seed("a", "bc", "set", 0));
    }

    #[test]
    fn a_known_vector_pins_the_derivation() {
        // Changing the derivation would silently change every hidden test: pin it.
        let v = derive(b"0123456789abcdef", "alice", "t", "set", 0);
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(b"0123456789abcdef").unwrap();
        let mut msg = b"workbook-grade/v1".to_vec();
        for f in [&b"alice"[..], b"t", b"set"] {
            msg.extend((f.len() as u64).to_le_bytes());
            msg.extend(f);
        }
        msg.extend(0u64.to_le_bytes());
        mac.update(&msg);
        let out = mac.finalize().into_bytes();
        assert_eq!(v, u64::from_le_bytes(out[..8].try_into().unwrap()));
        assert_ne!(v, 0);
    }

    #[test]
    fn short_secrets_are_refused() {
        assert!(Secret::new(b"short".to_vec())
            .err()
            .unwrap()
            .to_string()
            .contains("at least 16 bytes"));
        assert!(Secret::new(b"  sixteen-bytes-ok  \n".to_vec()).is_ok());
    }

    #[test]
    fn a_secret_inside_a_submission_is_refused() {
        let d = std::env::temp_dir().join(format!("grade-secret-{}", std::process::id()));
        let sub = d.join("alice");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("secret.txt"), "a secret of enough length").unwrap();
        let e = Secret::load(Some(&sub.join("secret.txt")), std::slice::from_ref(&sub))
            .err()
            .unwrap();
        assert!(e.to_string().contains("inside the submission"), "{e}");
        std::fs::write(d.join("secret.txt"), "a secret of enough length").unwrap();
        assert!(Secret::load(Some(&d.join("secret.txt")), &[sub])
            .unwrap()
            .is_some());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn public_seeds_ignore_the_student() {
        assert_eq!(public_seed(7, "t", "set", 0), public_seed(7, "t", "set", 0));
        assert_ne!(public_seed(7, "t", "set", 0), public_seed(8, "t", "set", 0));
    }
}
