//! The HTML around the charts: head, inline CSS and script, the embedded data.
use crate::escape;

/// The page's own CSS, inline.
const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;color:#222}\
table{border-collapse:collapse;font-variant-numeric:tabular-nums}td,th{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right}\
th{position:sticky;top:0;background:#fff}figure.chart{margin:1em 0}figure.empty{border:1px dashed #aaa;padding:2em;color:#666}\
.answer{font-size:1.2em}";

/// The page's script, inline: it marks the page ready, and any error it meets on the page.
const SCRIPT: &str = "(function(){var d=document.documentElement;\
window.addEventListener('error',function(e){d.setAttribute('data-errors',String(e.message))});\
JSON.parse(document.getElementById('stampede-data').textContent);\
d.setAttribute('data-ready','1');})();";

/// A whole page: `title` (text), `body` (markup built from escaped values), `data` (the JSON it
/// embeds, as serialized).
pub fn page(title: &str, body: &str, data: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n\
         <script type=\"application/json\" id=\"stampede-data\">{data}</script>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        title = escape::html(title),
        data = escape::script_json(data),
    )
}
