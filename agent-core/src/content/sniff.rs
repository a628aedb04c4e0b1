//! The media type of bytes, from their first bytes (`infer`'s signatures), never from a
//! file name.

/// The media type the bytes are, when `infer` knows it.
pub(super) fn media_type(bytes: &[u8]) -> Option<&'static str> {
    infer::get(bytes).map(|kind| kind.mime_type())
}

/// Whether a sniffed type and a declared one name the same type (aliases accepted:
/// `image/jpg` for `image/jpeg`, `audio/x-wav` and `audio/wave` for `audio/wav`,
/// `audio/mp3` for `audio/mpeg`; parameters such as `; charset=utf-8` ignored).
pub(super) fn same(sniffed: &str, declared: &str) -> bool {
    let declared = declared
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    canonical(sniffed) == canonical(&declared)
}

fn canonical(media_type: &str) -> &str {
    match media_type {
        "image/jpg" | "image/pjpeg" => "image/jpeg",
        "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => "audio/wav",
        "audio/mp3" | "audio/x-mpeg" => "audio/mpeg",
        "audio/x-flac" => "audio/flac",
        other => other,
    }
}
