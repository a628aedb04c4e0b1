//! Server-sent events read from a response's chunks (the HTML Living Standard's
//! "Server-sent events" framing: events end at a blank line; `data:` lines are joined
//! with newlines; other fields and comments are skipped).

/// Collects an SSE body's events as chunks arrive.
#[derive(Debug, Default)]
pub(crate) struct SseReader {
    buffer: Vec<u8>,
}

impl SseReader {
    /// Adds a chunk; returns the data of every event it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some((end, skip)) = boundary(&self.buffer) {
            let block: Vec<u8> = self.buffer.drain(..end + skip).take(end).collect();
            let text = String::from_utf8_lossy(&block);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                events.push(data.join("\n"));
            }
        }
        events
    }

    /// The bytes held for an event not yet complete.
    pub(crate) fn pending(&self) -> usize {
        self.buffer.len()
    }
}

/// Where the first blank line is: the block's end and the separator's length.
fn boundary(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::SseReader;

    #[test]
    fn events_split_across_chunks_are_joined() {
        let mut reader = SseReader::default();
        assert!(reader.push(b": ping\n\ndata: {\"a\"").is_empty());
        assert_eq!(
            reader.push(b":1}\n\ndata: x\r\n\r\n"),
            vec!["{\"a\":1}", "x"]
        );
        assert_eq!(reader.pending(), 0);
    }
}
