//! The floor: a few commands no rule or approval can allow.
//!
//! A floor against catastrophes a model might type, not a sandbox: it
//! knows `rm -rf /`, formatting a disk, writing over a disk device,
//! `chmod -R` of the root and the fork bomb, however they are wrapped or
//! quoted, and nothing else. A program that deletes files its own way, a
//! script file, or a command built at run time gets past it; run tools that
//! need containment in a container or as a user who can do little.

use super::shell::{Command, Reading, crude_commands};

/// Why the floor denies what `reading` runs, naming the command, if it
/// does.
pub(crate) fn check(reading: &Reading) -> Option<String> {
    if let Some(hit) = reading.commands.iter().find_map(check_command) {
        return Some(hit);
    }
    // What the reader couldn't vouch for, it may also have misread: scan
    // the raw lines word by word too.
    if reading.doubt.is_some() {
        for raw in &reading.raw {
            if is_fork_bomb(raw) {
                return Some("the fork bomb `:(){ :|:& };:`".to_owned());
            }
            if let Some(device) = redirect_to_disk(raw) {
                return Some(format!("writing to the disk {device}"));
            }
        }
        return crude_commands(reading).iter().find_map(check_command);
    }
    None
}

/// Block devices holding file systems, by the start of their names.
const DISKS: &[&str] = &[
    "/dev/sd",
    "/dev/nvme",
    "/dev/vd",
    "/dev/hd",
    "/dev/xvd",
    "/dev/mmcblk",
    "/dev/disk",
    "/dev/rdisk",
    "/dev/dm-",
    "/dev/mapper/",
    "/dev/md",
];

fn is_disk(path: &str) -> bool {
    DISKS
        .iter()
        .any(|d| path.starts_with(d) && path.len() > d.len())
}

/// Whether `operand` names the root, the home folder, or everything in
/// either.
fn is_root_or_home(operand: &str, home_too: bool) -> bool {
    let mut text = operand.to_owned();
    while text.contains("//") {
        text = text.replace("//", "/");
    }
    while text.len() > 1 && (text.ends_with('/') || text.ends_with("/.")) {
        text = text.trim_end_matches('.').to_owned();
        if text.len() > 1 {
            text.pop();
        }
    }
    if matches!(text.as_str(), "/" | "/*" | "/.*") {
        return true;
    }
    if !home_too {
        return false;
    }
    let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
    let bases = ["~", "$HOME", "${HOME}"];
    bases
        .iter()
        .map(|b| (*b).to_owned())
        .chain(home.map(|h| h.trim_end_matches('/').to_owned()))
        .any(|base| text == base || text == format!("{base}/*") || text == format!("{base}/.*"))
}

/// Whether a short-option cluster or long option among `argv` turns on
/// recursion.
fn is_recursive(argv: &[String]) -> bool {
    argv.iter().any(|w| {
        w == "--recursive" || (w.starts_with('-') && !w.starts_with("--") && w.contains(['r', 'R']))
    })
}

fn check_command(command: &Command) -> Option<String> {
    let text = command.text();
    if let Some(device) = command.writes.iter().find(|w| is_disk(w)) {
        return Some(format!("writing to the disk {device}: {text} > {device}"));
    }
    let (program, args) = command.argv.split_first()?;
    let operands = || args.iter().filter(|a| !a.starts_with('-'));
    let hit = match program.as_str() {
        "rm" => is_recursive(args) && operands().any(|o| is_root_or_home(o, true)),
        p if p.starts_with("mkfs") => true,
        "wipefs" | "mkswap" => true,
        "dd" => args
            .iter()
            .any(|a| a.strip_prefix("of=").is_some_and(is_disk)),
        "chmod" | "chown" | "chgrp" => {
            is_recursive(args) && operands().any(|o| is_root_or_home(o, false))
        }
        "tee" | "shred" => operands().any(|o| is_disk(o)),
        "cp" | "mv" | "install" => operands().next_back().is_some_and(|o| is_disk(o)),
        _ => false,
    };
    hit.then_some(text)
}

/// Whether `raw` holds the fork bomb, under any function name.
fn is_fork_bomb(raw: &str) -> bool {
    let tight: String = raw.chars().filter(|c| !c.is_whitespace()).collect();
    tight.match_indices("(){").any(|(at, _)| {
        let before = &tight[..at];
        let name_start = before
            .rfind(|c: char| ";&|(){}".contains(c))
            .map_or(0, |i| i + 1);
        let name = &before[name_start..];
        !name.is_empty() && tight[at + 3..].starts_with(&format!("{name}|{name}&"))
    })
}

/// The disk `raw` redirects output to, if any.
fn redirect_to_disk(raw: &str) -> Option<String> {
    let plain = raw.replace(['\'', '"', '\\'], "");
    plain.match_indices('>').find_map(|(at, _)| {
        let target = plain[at + 1..].trim_start_matches(['>', '|', '&', ' ', '\t']);
        let end = target
            .find(|c: char| c.is_whitespace() || ";&|()<>".contains(c))
            .unwrap_or(target.len());
        is_disk(&target[..end]).then(|| target[..end].to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::shell::read_argv;

    fn floor(script: &str) -> Option<String> {
        check(&read_argv(&["bash".into(), "-c".into(), script.into()]))
    }

    #[test]
    fn catastrophes_are_denied() {
        for line in [
            "rm -rf /",
            "rm -r -f /*",
            "rm --recursive --force ~",
            "rm -Rf ~/",
            "rm -rf $HOME",
            "rm -rf //",
            "mkfs.ext4 /dev/sda1",
            "wipefs -a /dev/sda",
            "mkswap /dev/sdb",
            "dd if=/dev/zero of=/dev/sda bs=1M",
            "dd if=x.img of=/dev/nvme0n1",
            "echo x > /dev/sda",
            "cat x.img >/dev/mmcblk0",
            "cat x.img | tee /dev/vda",
            "chmod -R 777 /",
            "chown -R nobody /",
            ":(){ :|:& };:",
            "bomb(){ bomb|bomb& }; bomb",
            "sudo -u root rm -rf /",
            "env X=1 timeout 5 rm -rf /",
            "/bin/rm -rf /",
            "'r''m' -rf /",
            "\\rm -rf /",
            "ls; rm -rf /",
            "echo $(rm -rf /)",
            "eval 'rm -rf /'",
            "bash -c 'rm -rf /'",
            "x=\"$(echo r)m\"; rm -rf / 2>/dev/null",
        ] {
            assert!(floor(line).is_some(), "{line} passed the floor");
        }
    }

    #[test]
    fn ordinary_commands_pass() {
        for line in [
            "rm -rf ./build",
            "rm -rf /tmp/x",
            "rm / ",
            "rm -f ~/notes.txt",
            "dd if=/dev/sda of=disk.img",
            "cat /dev/sda | head",
            "echo x > /dev/null",
            "chmod 755 /",
            "chmod -R 755 ./site",
            "grep -r 'rm -rf /' docs",
            "mkdir -p /srv/mkfs",
        ] {
            assert_eq!(floor(line), None, "{line}");
        }
    }

    #[test]
    fn the_hit_is_named() {
        assert_eq!(floor("sudo /bin/rm -rf /").as_deref(), Some("rm -rf /"));
    }
}
