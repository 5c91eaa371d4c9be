//! One student's submission: its folder (exactly one kernel file), where its report goes, the
//! metadata it must not ship, and its text, read within the rubric's limit and screened
//! ([`policy`]) before anything compiles it.

use super::policy;
use super::protocol::SOURCE_NAME;
use super::rubric::Rubric;
use super::seeds::sha256_hex;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

/// One student's submission: a kernel file, or a folder holding exactly one.
#[derive(Debug, Clone)]
pub struct Submission {
    pub student: String,
    pub path: PathBuf,
}

impl Submission {
    /// The kernel file of the submission.
    pub fn kernel_file(&self) -> Result<PathBuf> {
        if self.path.is_file() {
            return Ok(self.path.clone());
        }
        let mut cu: Vec<PathBuf> = std::fs::read_dir(&self.path)
            .with_context(|| format!("cannot read the submission {}", self.path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "cu"))
            .collect();
        cu.sort();
        match cu.len() {
            1 => Ok(cu.remove(0)),
            0 => bail!("{} holds no .cu file", self.path.display()),
            n => bail!(
                "{} holds {n} .cu files ({}): a submission is one kernel file",
                self.path.display(),
                cu.iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The folder of a student's reports in a batch's output: the name itself where every
/// character is a letter or a digit (of any script: `王伟`, `éve`), `_`, `-`, `.` (not
/// leading) or a space between two others (`carol smith`); any other byte, `%` included, is
/// percent-encoded (`bob/../x` → `bob%2F..%2Fx`, `.hidden` → `%2Ehidden`). So a readable name
/// keeps its folder, two names never share one, and the folder gives the name back. A name
/// whose folder would exceed 120 bytes keeps its first 80 and ends `~` and a hash of the whole
/// name (`~` is never in an encoded name).
pub fn report_folder(student: &str) -> String {
    use std::fmt::Write;
    let chars: Vec<char> = student.chars().collect();
    let mut t = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let inner = i > 0 && i + 1 < chars.len();
        let kept = c.is_alphanumeric()
            || c == '_'
            || c == '-'
            || (c == '.' && i > 0)
            || (c == ' ' && inner && chars[i - 1] != ' ' && chars[i + 1] != ' ');
        if kept {
            t.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(t, "%{b:02X}");
            }
        }
    }
    if t.is_empty() {
        return "%".into();
    }
    if t.len() > 120 {
        // Within 80 bytes, on a character boundary, never inside a %XX.
        let mut cut = 80;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        while t.as_bytes()[cut - 1] == b'%' || t.as_bytes()[cut - 2] == b'%' {
            cut -= 1;
        }
        t = format!("{}~{}", &t[..cut], &sha256_hex(student.as_bytes())[..16]);
    }
    t
}

/// A name safe as a folder name: letters, digits, `.`, `_` and `-`.
pub fn safe_name(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() || t.starts_with('.') {
        format!("_{t}")
    } else {
        t
    }
}

/// The folder a submission's student controls, resolved: the submission itself when it is a
/// folder, else the folder of its kernel file. `None`: it cannot be resolved.
pub fn submission_folder(path: &Path) -> Option<PathBuf> {
    let p = path.canonicalize().ok()?;
    if p.is_dir() {
        Some(p)
    } else {
        p.parent().map(Path::to_path_buf)
    }
}

/// The file name Gradescope gives its metadata.
pub const METADATA_NAME: &str = "submission_metadata.json";

/// A Gradescope metadata file inside the submission folder, if the student shipped one: never
/// read (the identity comes only from a trusted place), and named in the instructor's report.
pub fn untrusted_metadata(path: &Path) -> Option<PathBuf> {
    let p = submission_folder(path)?.join(METADATA_NAME);
    std::fs::symlink_metadata(&p).is_ok().then_some(p)
}

/// The submission's text (UTF-8, within the size limit) and its SHA-256.
/// The include screen and, for a Blackwell rubric, the architecture rules: what refuses a
/// source before anything compiles it.
///
/// The names that could tell the GPU emulation's build from the native one are refused only
/// where the emulation grades (`simulate` false): the simulator runs the native build itself, so
/// a kernel that tells the builds apart only does its own native work.
pub(super) fn screen(
    source: &str,
    arch: common::step::Arch,
    skip_screen: bool,
    simulate: bool,
) -> Result<(), String> {
    if !skip_screen {
        policy::check(source).map_err(|v| v.to_string())?;
    }
    if arch == common::step::Arch::Blackwell && !simulate {
        policy::check_arch_neutral(source).map_err(|v| v.to_string())?;
    }
    Ok(())
}

/// Whether `sub` can be graded at all (one `.cu` file, within the size limit, UTF-8 text that
/// passes the screen), found without the secret, a toolkit or a GPU: a submission that fails
/// here is graded "rejected" on any machine, so the grader says so before it asks for either.
pub fn precheck(
    sub: &Submission,
    rubric: &Rubric,
    skip_screen: bool,
    simulate: bool,
) -> Result<()> {
    let (source, _) = read_source(sub, rubric.limits.source_bytes)?;
    screen(&source, rubric.arch, skip_screen, simulate)
        .map_err(|v| anyhow!("refused before compiling: kernel.cu {v}"))
}

pub(super) fn read_source(sub: &Submission, limit: usize) -> Result<(String, String)> {
    let path = sub.kernel_file()?;
    // A link could point the grader (which reads as the instructor) at any file of the machine.
    let meta = std::fs::symlink_metadata(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.file_type().is_file() {
        bail!(
            "{} is not a regular file (links are refused)",
            path.display()
        );
    }
    if meta.len() as usize > limit {
        bail!(
            "{} is {} bytes; submissions are limited to {limit}",
            path.display(),
            meta.len()
        );
    }
    // Bounded again as it is read: the file may have grown since.
    let bytes = super::userfile::read(&path, limit as u64, "the submission")?;
    let sha = sha256_hex(&bytes);
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow!("{} is not UTF-8 text", path.display()))?;
    Ok((text, sha))
}

/// The names whose compiler messages a student may see: the submission's and the headers'.
pub fn own_files() -> Vec<&'static str> {
    let mut v = vec![SOURCE_NAME];
    v.extend(policy::allowed_headers());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_hold_exactly_one_kernel() {
        let d = std::env::temp_dir().join(format!("grade-sub-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let sub = Submission {
            student: "x".into(),
            path: d.clone(),
        };
        std::os::unix::fs::symlink("/etc/passwd", d.join("link.cu")).unwrap();
        let e = read_source(&sub, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("links are refused"), "{e}");
        std::fs::remove_file(d.join("link.cu")).unwrap();
        assert!(sub
            .kernel_file()
            .unwrap_err()
            .to_string()
            .contains("no .cu file"));
        std::fs::write(d.join("a.cu"), "").unwrap();
        assert_eq!(sub.kernel_file().unwrap(), d.join("a.cu"));
        std::fs::write(d.join("b.cu"), "").unwrap();
        assert!(sub
            .kernel_file()
            .unwrap_err()
            .to_string()
            .contains("2 .cu files (a.cu, b.cu)"));
        let _ = std::fs::remove_dir_all(&d);
        assert_eq!(safe_name("bob smith/../x"), "bob_smith_.._x");
        assert_eq!(safe_name(".hidden"), "_.hidden");
    }

    /// Percent-decoding, to show the folder names give the student's name back.
    fn decode(folder: &str) -> String {
        let b = folder.as_bytes();
        let (mut out, mut i) = (Vec::new(), 0);
        while i < b.len() {
            if b[i] == b'%' && i + 3 <= b.len() {
                out.push(u8::from_str_radix(&folder[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn report_folders_are_unique_and_give_the_name_back() {
        let names = [
            "alice",
            "王伟",
            "李娜",
            "éve",
            "ève",
            "carol smith",
            "carol_smith",
            "carol%20smith",
            "bob/../x",
            ".hidden",
            "..",
            "a.b-c_d",
            "gradescope-4242+777",
            " x",
            "x ",
            "a  b",
            "a b",
            "a%20b",
            "tab\tname",
        ];
        let folders: Vec<String> = names.iter().map(|n| report_folder(n)).collect();
        let mut unique = folders.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{folders:?}");
        for (n, f) in names.iter().zip(&folders) {
            assert!(
                f.chars()
                    .all(|c| c.is_alphanumeric() || "%._- ".contains(c)),
                "{f}"
            );
            assert!(
                !f.starts_with(' ') && !f.ends_with(' ') && !f.contains("  "),
                "{f:?}"
            );
            assert!(!f.starts_with('.') && !f.is_empty(), "{f}");
            assert_eq!(&decode(f), n, "{f}");
        }
        assert_eq!(report_folder("alice"), "alice");
        // Readable names keep their folder; what a path or a shell would misread is encoded.
        assert_eq!(report_folder("王伟"), "王伟");
        assert_eq!(report_folder("éve"), "éve");
        assert_eq!(report_folder("carol smith"), "carol smith");
        assert_eq!(report_folder("carol%20smith"), "carol%2520smith");
        assert_eq!(report_folder("bob/../x"), "bob%2F..%2Fx");
        assert_eq!(report_folder(".hidden"), "%2Ehidden");
        assert_eq!(report_folder(" x"), "%20x");
        assert_eq!(report_folder("a  b"), "a%20%20b");
        // A long name stays under the file system's limit, and distinct.
        let long_a = "名".repeat(100);
        let long_b = format!("{}字", "名".repeat(99));
        let (fa, fb) = (report_folder(&long_a), report_folder(&long_b));
        assert!(fa.len() <= 120 && fb.len() <= 120, "{fa} {fb}");
        assert_ne!(fa, fb);
        assert_eq!(report_folder(""), "%");
    }
}
