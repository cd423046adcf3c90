"""The page's stylesheet and script, served from this server (no CDN, no outside files).

The script only makes the page nicer: a trace loads when its row is opened, and new
activations appear at the top every few seconds, the cards above counting them. Without it
every row still links to its trace's own page.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from salon.web.context import HEADERS

__all__ = ["script", "stylesheet"]

CSS = """
:root { --ink:#1d2330; --muted:#687083; --line:#e3e6ee; --bg:#f6f7fb; --card:#fff;
  --accent:#3d5afe; --red:#c62828; --redbg:#fdecea; --amber:#b26a00; --amberbg:#fff4e0;
  --green:#2e7d32; --font: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 var(--font); color:var(--ink); background:var(--bg); }
header.top { display:flex; gap:16px; align-items:center; padding:10px 24px;
  background:#151a26; color:#fff; }
header.top .brand { color:#fff; font-weight:700; font-size:18px; text-decoration:none; }
header.top nav { display:flex; gap:8px; flex-wrap:wrap; flex:1; }
header.top form { margin:0; }
main { max-width:1200px; margin:0 auto; padding:20px 24px 60px; }
h1 { font-size:20px; margin:8px 0 16px; } h2 { font-size:16px; margin:24px 0 10px; }
h3 { font-size:15px; margin:4px 0 8px; } h4 { font-size:13px; margin:10px 0 6px; }
a { color:var(--accent); }
.chip { display:inline-block; padding:2px 10px; border-radius:12px; font-size:12px;
  background:#2c3446; color:#dfe4f2; }
.chip.up { background:#1f4d2b; color:#c8f0d0; } .chip.down { background:#6b1d1d; color:#ffd6d6; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(170px,1fr)); gap:12px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:12px 14px; }
.card b { display:block; font-size:20px; } .card span { color:var(--muted); font-size:12px; }
.panel { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px; }
.panel.alarm { border-color:#c0392b; background:#fdf0ee; margin:0 0 14px; }
.plot { width:100%; height:auto; }
.plot .bar { fill:#9fb0ff; } .plot .bar:hover { fill:var(--accent); }
.plot .axis { stroke:#b9bfcc; } .plot .tick { font-size:10px; fill:var(--muted); }
.plot polyline { fill:none; stroke-width:2; } .plot .billed { stroke:var(--green); }
.plot circle.billed { fill:var(--green); } .plot circle.expected { fill:var(--amber); }
.plot .expected { stroke:var(--amber); stroke-dasharray:4 3; }
.legend { color:var(--muted); font-size:12px; margin-top:4px; }
.legend i { display:inline-block; width:18px; height:3px; vertical-align:middle;
  margin:0 4px 0 12px; }
.legend .l-bar { background:#9fb0ff; height:10px; } .legend .l-billed { background:var(--green); }
.legend .l-expected { background:var(--amber); }
form.filters { display:flex; gap:8px; align-items:center; margin:8px 0 12px; }
select, input, button, textarea { font:inherit; }
button { background:var(--accent); color:#fff; border:0; border-radius:6px; padding:6px 14px;
  cursor:pointer; } button.quiet { background:#2c3446; }
#timeline details.trace { background:var(--card); border:1px solid var(--line);
  border-left:4px solid #b9c3e0; border-radius:8px; margin:6px 0; }
#timeline details.trace.outcome-error { border-left-color:var(--red); }
#timeline details.trace.outcome-error .outcome { color:var(--red); font-weight:600; }
#timeline details.trace.broken { border-left-color:var(--amber); }
#timeline details.trace.outcome-error.broken { border-left-color:var(--red); }
details.trace > summary { display:grid; cursor:pointer; list-style:none; padding:8px 12px;
  grid-template-columns: 150px minmax(160px,1.4fr) minmax(90px,1fr) minmax(90px,.9fr) 180px
  90px 156px;
  gap:10px; align-items:center; }
/* A cell's content may be one long word (a name, a channel key): it wraps in its column. */
details.trace > summary > span { min-width:0; overflow-wrap:anywhere; }
details.trace > summary::-webkit-details-marker { display:none; }
details.trace[open] > summary { border-bottom:1px solid var(--line); background:#fafbff; }
.when { color:var(--muted); font-variant-numeric:tabular-nums; }
.tokens, .cost { font-variant-numeric:tabular-nums; } .tokens { color:var(--muted);
  font-size:12px; }
.model { color:var(--muted); overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.outcome .reason { font-weight:400; }
.cache { display:grid; grid-template-columns:minmax(0,1fr); gap:2px; }
.share { width:100%; height:10px; }
.cache .read { color:var(--muted); font-size:11px; white-space:nowrap; }
.share .track { fill:#eceff6; } .share .fill { fill:var(--green); }
.share .tick { fill:var(--amber); }
.break { grid-column: 2 / -1; justify-self:start; background:var(--amberbg); color:var(--amber);
  border:1px solid #f3cf8c; border-radius:10px; padding:0 10px; font-size:12px; font-weight:600; }
.outcome-error .break { background:var(--redbg); color:var(--red); border-color:#f2b8b5; }
.detail { padding:12px 16px; }
.trace-detail .facts p { margin:4px 0; }
.timings { display:grid; gap:3px; margin:8px 0; max-width:560px; }
.timing { display:grid; grid-template-columns:120px 1fr 70px; gap:8px; align-items:center;
  font-size:12px; } .timing b { display:block; height:8px; background:#c5cdf3; border-radius:4px; }
.timing svg { width:100%; height:8px; } .timing rect { fill:#c5cdf3; }
.timing em { color:var(--muted); font-style:normal; text-align:right; }
.call, .tool { border:1px solid var(--line); border-radius:8px; padding:8px 12px; margin:10px 0;
  background:#fcfcfe; }
.cache-break { background:var(--amberbg); color:var(--amber); border:1px solid #f3cf8c;
  border-radius:6px; padding:6px 10px; font-weight:600; }
.prefix { color:var(--muted); } .flag { color:var(--amber); }
.error, .tool-error h4 { color:var(--red); } p.error { background:var(--redbg); padding:6px 10px;
  border-radius:6px; }
.badge { font-size:11px; padding:1px 8px; border-radius:10px; background:#e8ebf5;
  vertical-align:middle; }
.badge.outcome-error { background:var(--redbg); color:var(--red); }
.badge.outcome-answered { background:#e6f4ea; color:var(--green); }
.transcript .turn { display:grid; grid-template-columns:80px 1fr; gap:8px;
  border-top:1px dashed var(--line);
  padding:4px 0; } .transcript .role { color:var(--muted); font-size:12px; padding-top:2px; }
.transcript .role-assistant .role, .transcript .role-model .role { color:var(--accent); }
pre { margin:0; white-space:pre-wrap; word-break:break-word; font:12.5px/1.45 ui-monospace,
  SFMono-Regular, Menlo, Consolas, monospace; }
.marker { display:inline-block; margin-left:6px; font:11px var(--font); color:var(--accent);
  border:1px solid #c5cdf3; border-radius:8px; padding:0 6px; }
.meta { color:var(--muted); font-size:12px; }
details.raw pre, details.thinking pre { background:#f3f4f8; padding:8px; border-radius:6px;
  max-height:420px; overflow:auto; }
.approval { color:var(--green); font-weight:600; }
.login { max-width:420px; margin:60px auto; } .login input { width:100%; padding:8px;
  margin:8px 0; }
.problems { background:var(--redbg); color:var(--red); border-radius:8px; padding:10px 14px; }
.problems li { font-family:ui-monospace, monospace; font-size:12.5px; }
.saved { background:#e6f4ea; color:var(--green); border-radius:8px; padding:10px 14px; }
textarea.yaml { width:100%; min-height:420px; font:13px/1.45 ui-monospace, monospace; padding:10px;
  border:1px solid var(--line); border-radius:8px; }
table.keys { border-collapse:collapse; width:100%; font-size:12.5px; }
table.keys td, table.keys th { border-bottom:1px solid var(--line); padding:4px 8px;
  text-align:left;
  vertical-align:top; } table.keys td.layer { color:var(--muted); white-space:nowrap; }
table.keys pre { font-size:12px; }
table.settings { table-layout:fixed; } table.settings tr:first-child th:first-child
  { width:220px; } table.settings tr:first-child th:last-child { width:200px; }
details.defaults { margin-top:2px; } details.defaults > summary { color:var(--muted);
  font-size:12px; cursor:pointer; }
details.defaults pre { background:#f3f4f8; padding:6px 8px; border-radius:6px; }
table.notes textarea { width:100%; min-width:280px; font:inherit; } table.notes td.layer {
  white-space:normal; } .filters label { margin-right:10px; }
.files a { margin-right:12px; }
.memory ul { margin:4px 0 10px; padding-left:18px; font-size:12.5px; }
.memory li.tool-error { color:var(--red); }
.empty { color:var(--muted); padding:20px; text-align:center; }
"""

JS = """
(function () {
  'use strict';
  function load(details) {
    if (!details.open || details.dataset.loaded) return;
    details.dataset.loaded = '1';
    var target = details.querySelector('.detail');
    fetch(details.dataset.src, {credentials: 'same-origin'})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) { target.innerHTML = html; })
      .catch(function () { delete details.dataset.loaded; });
  }
  document.addEventListener('toggle', function (event) {
    var el = event.target;
    if (el.matches && el.matches('details.trace')) load(el);
  }, true);
  var timeline = document.getElementById('timeline');
  if (!timeline) return;
  function newest() {
    var first = timeline.querySelector('details.trace');
    return first ? first.dataset.id : '0';
  }
  function show(html) {
    var parsed = document.createElement('template');
    parsed.innerHTML = html;
    var cards = parsed.content.getElementById('cards');
    var shown = document.getElementById('cards');
    if (cards) {
      if (shown) shown.replaceWith(cards); else cards.remove();
    }
    if (!parsed.content.querySelector('details.trace')) return;
    var empty = timeline.querySelector('.empty');
    if (empty) empty.remove();
    timeline.prepend(parsed.content);
  }
  setInterval(function () {
    var query = new URLSearchParams(window.location.search);
    query.set('after', newest());
    var cards = document.getElementById('cards');
    if (cards) query.set('seen', cards.dataset.seen);
    fetch('/activity/rows?' + query.toString(), {credentials: 'same-origin'})
      .then(function (r) { return r.ok ? r.text() : ''; })
      .then(show)
      .catch(function () {});
  }, 5000);
})();
"""


async def stylesheet(request: Request) -> Response:
    return Response(CSS, media_type="text/css; charset=utf-8", headers=HEADERS)


async def script(request: Request) -> Response:
    return Response(JS, media_type="text/javascript; charset=utf-8", headers=HEADERS)
