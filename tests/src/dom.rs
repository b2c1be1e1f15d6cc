//! A page's DOM as a browser serialized it (`chromium --dump-dom`), read into a tree the tests can
//! ask questions of: elements by name, class and attribute, their text. Not a general HTML parser:
//! a browser's serialization is regular (every attribute quoted, every non-void element closed,
//! script and style text raw), and that is all it needs to read.

/// One node: an element (name, attributes, children) or text.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Element {
        name: String,
        attrs: Vec<(String, String)>,
        children: Vec<usize>,
    },
    Text(String),
}

/// The parsed page. Node 0 is a root holding the top-level nodes.
#[derive(Debug, Clone)]
pub struct Dom {
    nodes: Vec<Node>,
}

/// An element of a [`Dom`].
#[derive(Debug, Clone, Copy)]
pub struct El<'a> {
    dom: &'a Dom,
    id: usize,
}

/// Elements whose end tag is never written.
const VOID: [&str; 13] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];

/// Elements whose content is raw text up to their end tag (a script's `<` is not a tag).
const RAW: [&str; 4] = ["script", "style", "textarea", "title"];

impl Dom {
    pub fn parse(html: &str) -> Dom {
        let mut nodes = vec![Node::Element {
            name: String::new(),
            attrs: Vec::new(),
            children: Vec::new(),
        }];
        let mut open: Vec<usize> = vec![0];
        let mut rest = html;
        while !rest.is_empty() {
            let Some(lt) = rest.find('<') else {
                push(&mut nodes, &open, Node::Text(decode(rest)));
                break;
            };
            if lt > 0 {
                push(&mut nodes, &open, Node::Text(decode(&rest[..lt])));
            }
            rest = &rest[lt..];
            if let Some(after) = rest.strip_prefix("<!--") {
                rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            } else if rest.starts_with("<!") || rest.starts_with("<?") {
                rest = rest.find('>').map_or("", |end| &rest[end + 1..]);
            } else if let Some(after) = rest.strip_prefix("</") {
                let end = after.find('>').unwrap_or(after.len());
                let name = after[..end].trim().to_ascii_lowercase();
                if let Some(at) = open.iter().rposition(|&i| name_of(&nodes[i]) == name) {
                    open.truncate(at.max(1));
                }
                rest = after.get(end + 1..).unwrap_or("");
            } else {
                let (name, attrs, closed, after) = tag(&rest[1..]);
                rest = after;
                if name.is_empty() {
                    push(&mut nodes, &open, Node::Text("<".into()));
                    continue;
                }
                let id = push(
                    &mut nodes,
                    &open,
                    Node::Element {
                        name: name.clone(),
                        attrs,
                        children: Vec::new(),
                    },
                );
                if closed || VOID.contains(&name.as_str()) {
                    continue;
                }
                if RAW.contains(&name.as_str()) {
                    let end = raw_end(rest, &name);
                    let text = &rest[..end];
                    // Script and style text is not escaped; a title's and a textarea's is.
                    let text = if name == "script" || name == "style" {
                        text.to_string()
                    } else {
                        decode(text)
                    };
                    nodes.push(Node::Text(text));
                    let t = nodes.len() - 1;
                    if let Node::Element { children, .. } = &mut nodes[id] {
                        children.push(t);
                    }
                    rest = &rest[end..];
                    rest = rest.find('>').map_or("", |e| &rest[e + 1..]);
                    continue;
                }
                open.push(id);
            }
        }
        Dom { nodes }
    }

    /// Every element, in document order.
    pub fn elements(&self) -> Vec<El<'_>> {
        El { dom: self, id: 0 }.descendants()
    }

    /// The first element named `name` (lower case), in document order.
    pub fn first(&self, name: &str) -> Option<El<'_>> {
        self.elements().into_iter().find(|e| e.name() == name)
    }

    /// The element whose `id` is `id`.
    pub fn by_id(&self, id: &str) -> Option<El<'_>> {
        self.elements()
            .into_iter()
            .find(|e| e.attr("id") == Some(id))
    }

    /// Every reference the page makes to something outside itself: a `src`, `href` and the like
    /// that is not a fragment (`#…`) or inline data (`data:`), and a `url(…)` in a style that is not
    /// a fragment. A self-contained page has none.
    pub fn external_references(&self) -> Vec<String> {
        const LINKING: [&str; 7] = [
            "src",
            "href",
            "xlink:href",
            "srcset",
            "action",
            "poster",
            "formaction",
        ];
        let inline = |v: &str| v.is_empty() || v.starts_with('#') || v.starts_with("data:");
        let mut found = Vec::new();
        for e in self.elements() {
            for (k, v) in e.attrs() {
                if LINKING.contains(&k.as_str()) && !inline(v.trim()) {
                    found.push(format!("<{} {k}=\"{v}\">", e.name()));
                }
            }
            let style = if e.name() == "style" {
                e.text()
            } else {
                e.attr("style").unwrap_or("").to_string()
            };
            for (i, _) in style.match_indices("url(") {
                let arg = style[i + 4..]
                    .trim_start_matches(['\'', '"', ' '])
                    .to_string();
                if !inline(&arg) {
                    found.push(format!("<{}> style url({arg}", e.name()));
                }
            }
            if e.name() == "style" && style.contains("@import") {
                found.push("<style> @import".into());
            }
        }
        found
    }
}

impl<'a> El<'a> {
    fn node(&self) -> (&'a str, &'a [(String, String)], &'a [usize]) {
        match &self.dom.nodes[self.id] {
            Node::Element {
                name,
                attrs,
                children,
            } => (name, attrs, children),
            Node::Text(_) => unreachable!("an El is always an element"),
        }
    }

    pub fn name(&self) -> &'a str {
        self.node().0
    }

    pub fn attrs(&self) -> &'a [(String, String)] {
        self.node().1
    }

    pub fn attr(&self, key: &str) -> Option<&'a str> {
        self.attrs()
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn has_class(&self, class: &str) -> bool {
        self.attr("class")
            .is_some_and(|c| c.split_whitespace().any(|c| c == class))
    }

    /// The element children, in order.
    pub fn children(&self) -> Vec<El<'a>> {
        self.node()
            .2
            .iter()
            .filter(|&&i| matches!(self.dom.nodes[i], Node::Element { .. }))
            .map(|&i| El {
                dom: self.dom,
                id: i,
            })
            .collect()
    }

    /// Every element below this one, in document order.
    pub fn descendants(&self) -> Vec<El<'a>> {
        let mut out = Vec::new();
        let mut stack: Vec<El<'a>> = self.children().into_iter().rev().collect();
        while let Some(e) = stack.pop() {
            out.push(e);
            stack.extend(e.children().into_iter().rev());
        }
        out
    }

    /// Descendants named `name`.
    pub fn all(&self, name: &str) -> Vec<El<'a>> {
        self.descendants()
            .into_iter()
            .filter(|e| e.name() == name)
            .collect()
    }

    /// The text inside, as a reader sees it (entities decoded), whitespace kept.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let mut stack: Vec<usize> = self.node().2.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            match &self.dom.nodes[i] {
                Node::Text(t) => out.push_str(t),
                Node::Element { children, .. } => stack.extend(children.iter().rev()),
            }
        }
        out
    }
}

fn name_of(n: &Node) -> &str {
    match n {
        Node::Element { name, .. } => name,
        Node::Text(_) => "",
    }
}

/// Appends `node` to the innermost open element; returns its index.
fn push(nodes: &mut Vec<Node>, open: &[usize], node: Node) -> usize {
    nodes.push(node);
    let id = nodes.len() - 1;
    let parent = *open.last().expect("the root is always open");
    if let Node::Element { children, .. } = &mut nodes[parent] {
        children.push(id);
    }
    id
}

/// A start tag after its `<`: (name, attributes, self-closed, what follows its `>`).
fn tag(s: &str) -> (String, Vec<(String, String)>, bool, &str) {
    let name_end = s
        .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
        .unwrap_or(s.len());
    let name = s[..name_end].to_ascii_lowercase();
    let mut rest = &s[name_end..];
    let mut attrs = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("/>") {
            return (name, attrs, true, after);
        }
        if let Some(after) = rest.strip_prefix('>') {
            return (name, attrs, false, after);
        }
        if rest.is_empty() {
            return (name, attrs, false, rest);
        }
        if let Some(after) = rest.strip_prefix('/') {
            rest = after;
            continue;
        }
        let key_end = rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == '>' || c == '/')
            .unwrap_or(rest.len());
        let key = rest[..key_end].to_ascii_lowercase();
        rest = rest[key_end..].trim_start();
        let value = if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (v, r) = match after.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let body = &after[1..];
                    let end = body.find(q).unwrap_or(body.len());
                    (&body[..end], body.get(end + 1..).unwrap_or(""))
                }
                _ => {
                    let end = after
                        .find(|c: char| c.is_whitespace() || c == '>')
                        .unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            rest = r;
            decode(v)
        } else {
            String::new()
        };
        attrs.push((key, value));
    }
}

fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    hay.to_ascii_lowercase().find(&needle.to_ascii_lowercase())
}

/// Where the raw text of a `name` element ends: at its end tag, `</name` followed by a space, `/`
/// or `>` as an HTML parser reads it (`</script\u003e` in a script's JSON ends nothing), else at
/// the end.
fn raw_end(text: &str, name: &str) -> usize {
    let tag = format!("</{name}");
    let mut from = 0;
    while let Some(at) = find_ci(&text[from..], &tag) {
        let end = from + at;
        let next = text[end + tag.len()..].chars().next();
        if next.is_none_or(|c| matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' ' | '/' | '>')) {
            return end;
        }
        from = end + tag.len();
    }
    text.len()
}

/// Character references as a browser writes them: the few named ones it uses, and numeric ones.
fn decode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.find(';').filter(|&i| i <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let c = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some('\u{a0}'),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .map(|h| u32::from_str_radix(h, 16))
                .or_else(|| entity.strip_prefix('#').map(str::parse::<u32>))
                .and_then(Result::ok)
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_serialized_page_reads_back_as_its_tree() {
        let dom = Dom::parse(
            "<!DOCTYPE html>\n<html lang=\"en\" data-ready=\"1\"><head><meta charset=\"utf-8\">\
             <title>a &amp; b</title><style>a>b{c:url(#p)}</style></head><body>\
             <table id=\"steps\"><tr><td data-col=\"x\">1&nbsp;&lt;2</td><td data-col=\"y\"></td></tr></table>\
             <!-- <td>not</td> --><script>if (a<b) x='</p></scripts</script\\u003e';</script >\
             <figure class=\"chart empty\" data-chart=\"server\"><svg><g data-s=\"0\"><path d=\"M0 0\"/><circle r=\"2\"></circle></g></svg></figure>\
             </body></html>",
        );
        let html = dom.first("html").unwrap();
        assert_eq!(html.attr("data-ready"), Some("1"));
        assert_eq!(html.attr("data-errors"), None);
        assert_eq!(dom.first("title").unwrap().text(), "a & b");
        let cells: Vec<(Option<&str>, String)> = dom
            .by_id("steps")
            .unwrap()
            .all("td")
            .iter()
            .map(|td| (td.attr("data-col"), td.text()))
            .collect();
        assert_eq!(
            cells,
            [
                (Some("x"), "1\u{a0}<2".to_string()),
                (Some("y"), String::new())
            ]
        );
        assert_eq!(
            dom.first("script").unwrap().text(),
            "if (a<b) x='</p></scripts</script\\u003e';"
        );
        let fig = dom.first("figure").unwrap();
        assert!(fig.has_class("chart") && fig.has_class("empty") && !fig.has_class("char"));
        let g = fig.all("g");
        // The self-closed path does not swallow the circle after it.
        let in_g: Vec<&str> = g[0].children().iter().map(El::name).collect();
        assert_eq!(in_g, ["path", "circle"]);
        assert!(dom.external_references().is_empty());
    }

    #[test]
    fn references_outside_the_page_are_found() {
        let dom = Dom::parse(
            "<html><head><link rel=\"stylesheet\" href=\"x.css\"><style>@import 'y.css';</style></head>\
             <body><a href=\"#top\">top</a><img src=\"data:image/png;base64,AA\">\
             <script src=\"https://cdn.example/x.js\"></script><div style=\"background:url(z.png)\"></div></body></html>",
        );
        let found = dom.external_references();
        assert_eq!(
            found,
            [
                "<link href=\"x.css\">",
                "<style> @import",
                "<script src=\"https://cdn.example/x.js\">",
                "<div> style url(z.png)",
            ]
        );
    }
}
