//! Everything a run carries (URLs, headers, labels, notes, agent names) reaches the page through
//! these: a value from a run is text, never markup.
use std::fmt::Write;

/// `s` as HTML text or a quoted attribute value.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON text made safe inside `<script type="application/json">`: the HTML parser ends a script
/// element at `</script` and treats `<!--` specially whatever the type, so every `<` (and `>`, `&`,
/// and the two line separators JavaScript once refused) is written as a `\u` escape, which JSON reads
/// back as the same character.
pub fn script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_a_value_is_text() {
        assert_eq!(
            html(r#"</script><img src=x onerror="alert(1)">&'"#),
            "&lt;/script&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn json_in_a_script_cannot_close_it_and_reads_back_the_same() {
        let value = serde_json::json!({ "h": "</script><!-- \u{2028} & >" });
        let safe = script_json(&value.to_string());
        assert!(!safe.contains('<') && !safe.contains('>') && !safe.contains('&'));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
