//! `top`'s keys, read from the terminal with poll(2) and read(2) instead of
//! crossterm's event loop: on a terminal that has gone away, crossterm's
//! reader spins on read() returning 0 and never returns to its caller, so
//! `top` went on at full CPU, its programs attached, deaf to SIGTERM. Here a
//! hangup, end of input or a read error is an error the caller ends on.

use std::os::fd::AsFd;
use std::time::Duration;

use anyhow::{bail, Result};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

const ESC: u8 = 0x1b;

/// Waits up to `timeout` for keys on stdin; returns those read as (key,
/// with Ctrl), Esc as 'q'. Fails once the terminal is gone.
pub fn poll_keys(timeout: Duration) -> Result<Vec<(char, bool)>> {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(
        &mut fds,
        PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX),
    ) {
        Ok(0) | Err(Errno::EINTR) => return Ok(Vec::new()),
        Ok(_) => {}
        Err(e) => bail!("polling the terminal: {e}"),
    }
    let events = fds[0].revents().unwrap_or(PollFlags::empty());
    if events.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) {
        bail!("the terminal hung up");
    }
    let mut buf = [0u8; 64];
    match nix::unistd::read(fd, &mut buf) {
        Ok(0) => bail!("the terminal hung up (end of input)"),
        Ok(n) => Ok(decode_keys(&buf[..n])),
        Err(Errno::EINTR | Errno::EAGAIN) => Ok(Vec::new()),
        Err(e) => bail!("reading the terminal: {e}"),
    }
}

/// Keys in the bytes of one read from a terminal in raw mode: printable
/// ASCII as itself, control bytes as Ctrl + letter, a lone Esc as 'q'; an
/// escape sequence (arrows, function keys: Esc and more in one read) is
/// skipped whole.
pub fn decode_keys(bytes: &[u8]) -> Vec<(char, bool)> {
    if bytes == [ESC] {
        return vec![('q', false)];
    }
    let end = bytes.iter().position(|&b| b == ESC).unwrap_or(bytes.len());
    bytes[..end]
        .iter()
        .filter_map(|&b| match b {
            1..=26 => Some(((b'a' + b - 1) as char, true)),
            0x20..=0x7e => Some((b as char, false)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_bytes_become_keys() {
        assert_eq!(decode_keys(b"q"), [('q', false)]);
        assert_eq!(decode_keys(b"sp"), [('s', false), ('p', false)]);
        assert_eq!(decode_keys(&[3]), [('c', true)]);
        assert_eq!(decode_keys(&[ESC]), [('q', false)]);
        // Up arrow: not Esc.
        assert_eq!(decode_keys(b"\x1b[A"), []);
        assert_eq!(decode_keys(b"s\x1b[A"), [('s', false)]);
    }
}
