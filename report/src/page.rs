//! The HTML around the charts: head, inline CSS and script, the embedded data.
use crate::chart::STYLE as CHART_STYLE;
use crate::escape;

/// The page's own CSS, inline.
const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:72em;padding:0 1em;color:#222}\
table{border-collapse:collapse;font-variant-numeric:tabular-nums}td,th{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right}\
th{position:sticky;top:0;background:#fff}figure.chart{margin:1em 0}figure.empty{border:1px dashed #aaa;padding:2em;color:#666}\
.answer{font-size:1.2em}.meta{display:flex;flex-wrap:wrap;gap:0 1.5em;margin:0}.meta div{display:flex;gap:.4em}\
.meta dt{color:#666}.meta dd{margin:0}.strip{display:grid;grid-template-columns:repeat(auto-fit,minmax(20em,1fr));gap:0 1em}\
.wide{overflow-x:auto}#steps td,#agents td{white-space:nowrap}#plan th{text-align:left}#plan td{text-align:left;font-family:monospace;word-break:break-all}";

/// The page's script, inline and plain (no library): a `table[data-fill]` built from the embedded
/// columns it names (each cell as `data::text` writes it, `≥` before a lower bound), hover readout
/// of the nearest point (a line's vertices from its path data: `M x y` then steps `l dx dy …`), legend entries that hide what they name, the log/linear switch. It marks the page ready, and any error
/// it meets on the page. Numbers are written as the charts' ticks write them (`chart::Unit::label`).
macro_rules! page_script {
    ($charts:literal) => {
        concat!(
            r#"(function(){var d=document.documentElement;
window.addEventListener('error',function(e){d.setAttribute('data-errors',String(e.message))});
var D=JSON.parse(document.getElementById('stampede-data').textContent);
document.querySelectorAll('table[data-fill]').forEach(function(t){var a=D[t.getAttribute('data-fill')],f=document.createDocumentFragment(),
cols=[].map.call(t.querySelectorAll('th[data-col]'),function(h){return h.getAttribute('data-col')});
for(var i=0;i<a[cols[0]].length;i++){var tr=document.createElement('tr'),lb=a.lower_bound?a.lower_bound[i].split(' '):[];
cols.forEach(function(c){var v=a[c][i],td=document.createElement('td');if(c=='agent'&&typeof v=='number')v=D.agents[v];
td.textContent=(lb.indexOf(c.replace(/_ms$/,''))>=0?'\u2265':'')+(v===null?'-':String(v));tr.appendChild(td)});f.appendChild(tr)}
t.querySelector('tbody').appendChild(f)});
function s(x){if(!x||!isFinite(x))return'0';var p=Math.max(0,Math.min(6,2-Math.floor(Math.log10(Math.abs(x)))));return String(+x.toFixed(p))}
function fmt(v,u){v=+v;var a=Math.abs(v);
if(u=='ms')return a>=1000?s(v/1000)+' s':s(v)+' ms';
if(u=='s')return a>=120?s(v/60)+' min':s(v)+' s';
if(u=='pct')return s(v)+' %';
if(u=='q')return String(+(100*v).toFixed(5))+' %';
return a>=1e9?s(v/1e9)+'G':a>=1e6?s(v/1e6)+'M':a>=1e3?s(v/1e3)+'k':s(v)}
function inv(m,px){m=m.split(' ');var t=+m[1]+(px-m[3])/(m[4]-m[3])*(m[2]-m[1]);return m[0]=='g'?Math.pow(10,t):m[0]=='p'?1-Math.pow(10,-t):t}
function chart(f){var svg=f.querySelector('svg');if(!svg)return;
var ro=svg.querySelector('.ro'),xu=svg.getAttribute('data-xu'),yu=svg.getAttribute('data-yu'),
hl=svg.appendChild(document.createElementNS('http://www.w3.org/2000/svg','circle'));hl.setAttribute('class','hl off');hl.setAttribute('r','4.5');
f.querySelectorAll('.key').forEach(function(k){k.addEventListener('click',function(){var h=k.classList.toggle('hidden');
f.querySelectorAll('svg [data-s="'+k.getAttribute('data-s')+'"]').forEach(function(g){g.classList.toggle('off',h)})})});
var sw=f.querySelector('.scale');if(sw)sw.addEventListener('click',function(){sw.setAttribute('aria-pressed',sw.getAttribute('aria-pressed')!='true');
f.querySelectorAll('.plot').forEach(function(p){p.classList.toggle('off')})});
function clear(){ro.textContent='';hl.classList.add('off')}
svg.addEventListener('mousemove',function(e){var m=svg.getScreenCTM();if(!m)return;var p=svg.createSVGPoint();p.x=e.clientX;p.y=e.clientY;p=p.matrixTransform(m.inverse());
var pl=svg.querySelector('.plot:not(.off)');if(!pl)return;var best=null,bd=900,v,at;
function near(x,y,el,val){var dd=(x-p.x)*(x-p.x)+(y-p.y)*(y-p.y);if(dd<bd){bd=dd;best=el;at=[x,y];v=val}}
pl.querySelectorAll('[data-s]:not(.off) [data-v]').forEach(function(el){var vs=el.getAttribute('data-v').split(',');
el.getAttribute('d').split('M').slice(1).forEach(function(q,i){q=q.split(' ');near(parseFloat(q[0]),parseFloat(q[1]),el,vs[i].split(' '))})});
pl.querySelectorAll('[data-s]:not(.off) path.ln').forEach(function(el){var n=el.getAttribute('d').match(/-?[\d.]+/g),x=+n[0],y=+n[1];
for(var i=0;i+1<n.length;i+=2){if(i){x+=+n[i];y+=+n[i+1]}near(x,y,el,[inv(svg.getAttribute('data-x'),x),inv(pl.getAttribute('data-y'),y)])}});
clear();if(!best)return;hl.setAttribute('cx',at[0]);hl.setAttribute('cy',at[1]);hl.classList.remove('off');
ro.textContent=best.parentNode.getAttribute('data-n')+': '+fmt(v[1],yu)+' at '+fmt(v[0],xu)});
svg.addEventListener('mouseleave',clear)}
document.querySelectorAll('rect[data-t]').forEach(function(r){var t=document.getElementById('shade-'+r.getAttribute('data-t'));if(t&&t.firstChild)r.appendChild(t.firstChild.cloneNode(true))});
"#,
            $charts,
            "d.setAttribute('data-ready','1');})();"
        )
    };
}

/// The report's script: its charts bound once, at load.
const SCRIPT: &str = page_script!("document.querySelectorAll('figure.chart').forEach(chart);\n");

/// The live page's script: the report's, its charts bound at load and again in each section a
/// `view` message redraws. When the embedded data names a `stream` (and the run is not over), it
/// follows it with an `EventSource` from the event after the page's own (`?after=N`, so opening the
/// page replays nothing it already shows; the page's own query, the live address's token, goes along,
/// and onto its links), which itself reconnects and resumes from the last event id it saw. A view no newer than the page's (`data-last-event`) is left out: a reconnect replays the
/// current one. `#live-state`'s `data-stream` says how the stream is: `static` (none), `connecting`,
/// `open`, `lost` (reconnecting), `closed` (the browser gave up), `over` (the run ended).
const LIVE_SCRIPT: &str = page_script!(
    r#"document.querySelectorAll('figure.chart').forEach(chart);
d.setAttribute('data-last-event',String(D.last));
var Q=location.search.slice(1);function links(e){if(Q)e.querySelectorAll('a[href]').forEach(function(a){var h=a.getAttribute('href');if(!/^[a-z]+:|^[\/#?]/i.test(h)&&h.indexOf('?')<0)a.setAttribute('href',h+'?'+Q)})}
links(document);
var st=document.getElementById('live-state');function state(s,t){st.setAttribute('data-stream',s);st.textContent=t}
if(D.stream&&!D.finished){var es=new EventSource(D.stream+'?after='+D.last+(Q?'&'+Q:''));state('connecting','connecting to the run\u2026');
es.addEventListener('open',function(){state('open','live: every event redraws the page')});
es.addEventListener('view',function(m){var v=JSON.parse(m.data);if(v.last<=+d.getAttribute('data-last-event'))return;
for(var k in v.sections){var e=document.querySelector('[data-section="'+k+'"]');if(e){e.innerHTML=v.sections[k];e.querySelectorAll('figure.chart').forEach(chart);links(e)}}
d.setAttribute('data-last-event',String(v.last));if(v.finished){es.close();state('over','the run is over: this page is final')}});
es.addEventListener('error',function(){if(es.readyState==2)state('closed','stream closed: reload the page to follow the run again');
else state('lost','stream lost, reconnecting\u2026')})}
"#
);

/// A whole page: `title` (text), `style` (CSS of its own, after the shared one), `body` (markup
/// built from escaped values), `data` (the JSON it embeds, as serialized).
pub fn styled_page(title: &str, style: &str, body: &str, data: &str) -> String {
    shell(title, style, body, data, SCRIPT)
}

/// The live page (`live_page.rs`): the report's look, and its script following the run's stream.
pub fn live_shell(title: &str, style: &str, body: &str, data: &str) -> String {
    shell(title, style, body, data, LIVE_SCRIPT)
}

fn shell(title: &str, style: &str, body: &str, data: &str, script: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}{CHART_STYLE}{style}</style>\n</head>\n<body>\n{body}\n\
         <script type=\"application/json\" id=\"stampede-data\">{data}</script>\n\
         <script>{script}</script>\n</body>\n</html>\n",
        title = escape::html(title),
        data = escape::script_json(data),
    )
}
