use super::*;

const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
];
const PDF: &[u8] = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n";

#[test]
fn bytes_are_sniffed_and_a_type_that_does_not_match_them_is_refused() {
    let part = Part::from_bytes(PNG.to_vec()).unwrap();
    assert_eq!(part.kind(), Kind::Image);
    assert_eq!(part.media().unwrap().media_type, "image/png");
    let pdf = Part::from_bytes(PDF.to_vec()).unwrap();
    assert_eq!(pdf.kind(), Kind::Document);
    assert_eq!(
        Part::from_bytes_as(PNG.to_vec(), "application/pdf"),
        Err(ContentError::Mismatch {
            declared: "application/pdf".into(),
            sniffed: "image/png".into()
        })
    );
    // An alias of the same type is the same type.
    assert!(Part::from_bytes_as(vec![0xff, 0xd8, 0xff, 0xe0, 0, 0x10], "image/jpg").is_ok());
    assert_eq!(Part::from_bytes(Vec::new()), Err(ContentError::Empty));
    assert_eq!(
        Part::from_bytes(b"just some text".to_vec()),
        Err(ContentError::UnknownType)
    );
    // Unknown bytes with a type given: taken as that type.
    let text = Part::from_bytes_as(b"plain notes".to_vec(), "text/plain").unwrap();
    assert_eq!(text.kind(), Kind::Document);
    assert!(matches!(
        Part::from_bytes_as(PNG.to_vec(), "png"),
        Err(ContentError::InvalidMediaType { .. })
    ));
}

#[test]
fn a_file_is_sniffed_from_its_bytes_not_its_name() {
    let dir = std::env::temp_dir().join(format!("agent-core-content-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("photo.pdf");
    std::fs::write(&path, PNG).unwrap();
    let part = Part::from_path(&path).unwrap();
    assert_eq!(part.kind(), Kind::Image);
    assert_eq!(part.media().unwrap().name.as_deref(), Some("photo.pdf"));
    let missing = Part::from_path(dir.join("nope.png"));
    assert!(
        matches!(missing, Err(ContentError::Unreadable { .. })),
        "{missing:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bytes_serialize_as_base64_and_are_never_shown() {
    let part = Part::from_bytes(PNG.to_vec()).unwrap().named("a.png");
    let json = serde_json::to_value(&part).unwrap();
    assert_eq!(json["type"], "image");
    assert_eq!(json["media_type"], "image/png");
    assert_eq!(json["source"]["bytes"], "iVBORw0KGgoAAAAN");
    let back: Part = serde_json::from_value(json).unwrap();
    assert_eq!(back, part);
    let shown = format!("{part:?}");
    assert!(shown.contains("12 bytes, sha256:"), "{shown}");
    assert!(!shown.contains("137"), "{shown}");
    let b64 = Part::from_base64("iVBORw0KGgoAAAAN", "image/png").unwrap();
    assert_eq!(b64.byte_len(), 12);
    assert!(matches!(
        Part::from_base64("not base64!", "image/png"),
        Err(ContentError::Base64 { .. })
    ));
    assert_eq!(
        Bytes::from(b"abc").sha256(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn an_input_from_parts_takes_the_leading_text_as_its_text() {
    let image = Part::from_bytes(PNG.to_vec()).unwrap();
    let input: Input = vec![Part::text("look"), Part::text("here"), image.clone()].into();
    assert_eq!(input.as_text(), "look\nhere");
    assert_eq!(input.parts(), std::slice::from_ref(&image));
    let plain: Input = "hello".into();
    assert_eq!(plain.as_text(), "hello");
    assert!(plain.parts().is_empty());
    let url = Part::from_url("https://example.com/a.pdf", "application/pdf").unwrap();
    assert_eq!(
        url.describe(),
        "document application/pdf at https://example.com/a.pdf"
    );
    assert_eq!(image.describe(), "image image/png, 12 bytes");
}
