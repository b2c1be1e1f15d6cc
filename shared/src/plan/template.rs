//! A text with `${name}` in it (a path, a header's value, a body), split once into literal bytes and
//! the variables between them, so that sending it is copying slices: nothing is parsed per request.
//!
//! `${` opens a variable that `}` closes; a name is ASCII letters, digits, `_`, `-` and `.`, starting
//! with a letter or `_`. `$${` is a literal `${`; any other `$` is itself.

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(Vec<u8>),
    /// A variable, by its index in the names the template was compiled against.
    Var(usize),
}

/// A text compiled against a list of variable names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// What is wrong with a template, said with the text around it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("'${{' at byte {at} of '{text}' is never closed by '}}'")]
    Unclosed { text: String, at: usize },
    #[error(
        "'${{{name}}}' in '{text}' is not a variable name (letters, digits, '_', '-', '.', from a letter or '_')"
    )]
    BadName { text: String, name: String },
    #[error("'${{{name}}}' in '{text}' names no variable; the variables are: {known}")]
    Unknown {
        text: String,
        name: String,
        known: String,
    },
}

impl Template {
    /// Compiles `text` against `names`, the variables the run defines, in their order.
    pub fn compile(text: &str, names: &[&str]) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.extend_from_slice(&rest.as_bytes()[..at]);
            let after = &rest[at + 1..];
            if let Some(escaped) = after.strip_prefix("${") {
                literal.extend_from_slice(b"${");
                rest = escaped;
            } else if let Some(open) = after.strip_prefix('{') {
                let Some(close) = open.find('}') else {
                    let at = text.len() - rest.len() + at;
                    return Err(TemplateError::Unclosed {
                        text: text.into(),
                        at,
                    });
                };
                let name = &open[..close];
                let index = variable(text, name, names)?;
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                parts.push(Part::Var(index));
                rest = &open[close + 1..];
            } else {
                literal.push(b'$');
                rest = after;
            }
        }
        literal.extend_from_slice(rest.as_bytes());
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Template { parts })
    }

    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Whether it holds no variable: its bytes are the same for every request.
    pub fn is_fixed(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    /// The variables it uses, by index, in order of appearance (repeats included).
    pub fn variables(&self) -> impl Iterator<Item = usize> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(i) => Some(*i),
            Part::Literal(_) => None,
        })
    }

    /// Appends the text with each variable's value (by index in `values`) to `out`.
    pub fn render(&self, values: &[&[u8]], out: &mut Vec<u8>) {
        for part in &self.parts {
            match part {
                Part::Literal(bytes) => out.extend_from_slice(bytes),
                Part::Var(i) => out.extend_from_slice(values[*i]),
            }
        }
    }
}

/// Whether `name` may name a variable: ASCII letters, digits, `_`, `-` and `.`, from a letter or `_`.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn variable(text: &str, name: &str, names: &[&str]) -> Result<usize, TemplateError> {
    if !is_variable_name(name) {
        return Err(TemplateError::BadName {
            text: text.into(),
            name: name.into(),
        });
    }
    names
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| TemplateError::Unknown {
            text: text.into(),
            name: name.into(),
            known: if names.is_empty() {
                "none (define them with a feeder or a setup's extraction)".into()
            } else {
                names.join(", ")
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &Template, values: &[&[u8]]) -> String {
        let mut out = Vec::new();
        t.render(values, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn variables_are_found_once_and_filled_per_request() {
        let t = Template::compile(
            "/users/${id}/orders?token=${token}&again=${id}",
            &["token", "id"],
        )
        .unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), [1, 0, 1]);
        assert!(!t.is_fixed());
        assert_eq!(
            render(&t, &[b"abc", b"42"]),
            "/users/42/orders?token=abc&again=42"
        );
        assert_eq!(render(&t, &[b"", b"7"]), "/users/7/orders?token=&again=7");
    }

    #[test]
    fn a_dollar_that_opens_nothing_is_itself_and_double_dollar_escapes() {
        let t = Template::compile("$5 for $${literal} and ${x}$", &["x"]).unwrap();
        assert_eq!(render(&t, &[b"y"]), "$5 for ${literal} and y$");
        let fixed = Template::compile("price: $10", &[]).unwrap();
        assert!(fixed.is_fixed());
        assert_eq!(fixed.parts(), [Part::Literal(b"price: $10".to_vec())]);
        assert_eq!(Template::compile("", &[]).unwrap().parts(), []);
    }

    #[test]
    fn a_bad_template_is_refused_with_its_text() {
        let e = Template::compile("/a/${id", &["id"]).unwrap_err();
        assert_eq!(
            e,
            TemplateError::Unclosed {
                text: "/a/${id".into(),
                at: 3
            }
        );
        let e = Template::compile("/a/${9lives}", &["id"]).unwrap_err();
        assert!(e.to_string().contains("not a variable name"), "{e}");
        let e = Template::compile("/a/${user}", &["id", "token"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'${user}' in '/a/${user}' names no variable; the variables are: id, token"
        );
        let e = Template::compile("${x}", &[]).unwrap_err();
        assert!(e.to_string().contains("define them with a feeder"), "{e}");
    }
}
