/* firstfault HTML report: the views over the embedded page model (see docs/html-report.md).
 *
 * Every string that came from a log is untrusted. It is written with textContent, or passed
 * through esc() where ECharts wants HTML (tooltips) and rich() where it parses {style|text}.
 */
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('ff-data').textContent);
  var FF = (window.__ff = { ready: false, errors: [], charts: {}, timings: {}, data: D });
  var NF = new Intl.NumberFormat('en-US');
  var ROLES = ['root', 'cascade', 'teardown', 'noise'];
  var COLORS = { root: '#d1242f', cascade: '#e8a317', teardown: '#6e7bb8', noise: '#b8bcc4' };
  var TOPO_COLORS = { healthy: '#9fd3a8', culprit: '#d1242f', failed: '#8e1b55', victim: '#e8a317',
    torn_down: '#6e7bb8', no_data: '#eceff3' };
  var TOPO_LABELS = { healthy: 'healthy', culprit: 'culprit', failed: 'failed (own root event)',
    victim: 'waiting victim', torn_down: 'torn down', no_data: 'no data' };
  var G = D.groups, M = D.marks, NM = M.t.length;
  var NH = D.hosts.length, NR = D.ranks.length;
  var PROG = D.progress;

  // ---------------------------------------------------------------- helpers
  function fmtInt(n) { return NF.format(n); }
  function esc(s) {
    return String(s == null ? '' : s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }
  function rich(s) { return String(s == null ? '' : s).replace(/[{}|]/g, ' '); }
  function fmtRel(ms, digits) {
    if (ms == null) return '—';
    var sign = ms < 0 ? '−' : '+', a = Math.abs(ms) / 1000;
    if (a < 1) return sign + (a * 1000).toFixed(a < 0.01 ? 2 : 0) + ' ms';
    if (a < 120) return sign + a.toFixed(digits == null ? (a < 10 ? 3 : 2) : digits) + ' s';
    if (a < 7200) return sign + Math.floor(a / 60) + ' min ' + (a % 60).toFixed(1) + ' s';
    return sign + Math.floor(a / 3600) + ' h ' + Math.floor((a % 3600) / 60) + ' min';
  }
  function fmtAxis(ms) {
    var a = Math.abs(ms) / 1000, sign = ms < 0 ? '−' : ms > 0 ? '+' : '';
    if (a === 0) return '0';
    if (a < 1) return sign + Math.round(a * 1000) + ' ms';
    if (a < 3600) return sign + (+a.toFixed(a < 100 ? 2 : 1)) + ' s';
    var hh = Math.floor(a / 3600), mm = Math.floor((a % 3600) / 60), ss = Math.round(a % 60);
    return sign + hh + ':' + (mm < 10 ? '0' : '') + mm + ':' + (ss < 10 ? '0' : '') + ss;
  }
  function fmtAbs(ms) {
    if (ms == null || D.t0 == null) return '';
    var d = new Date(D.t0 * 1000 + ms);
    return isNaN(d.getTime()) ? '' : d.toISOString().replace('T', ' ').replace('Z', ' UTC');
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function rankNo(ri) { return D.ranks[ri]; }
  function hostName(hi) { return hi >= 0 ? D.hosts[hi] : '(no host)'; }
  var isPseudo = {};
  (D.pseudo_hosts || []).forEach(function (h) { isPseudo[h] = true; });
  // The GPU a rank ran on: as logged, else its slot on a real host; unknown on a placeholder host.
  function gpuLabel(ri) {
    var g = D.rank_gpu ? D.rank_gpu[ri] : null;
    if (g != null) return String(g);
    if (isPseudo[D.rank_host[ri]] || D.rank_slot[ri] < 0) return null;
    return String(D.rank_slot[ri]);
  }
  function rankWhere(ri) { var g = gpuLabel(ri); return 'rank ' + rankNo(ri) + (g != null ? ' · GPU ' + g : ''); }
  function guard(name, fn) {
    var t = performance.now();
    try { fn(); } catch (err) {
      console.error('firstfault report: ' + name + ' failed: ' + (err && err.stack || err));
      var box = document.getElementById(name);
      if (box) { box.textContent = 'This view failed to render: ' + err; }
    }
    FF.timings[name + '_ms'] = Math.round(performance.now() - t);
  }
  window.addEventListener('error', function (e) { FF.errors.push(String(e.message)); });

  // Per-host and per-rank event lists (indices into the mark columns, already time-sorted).
  var hostMarks = [], rankMarks = [], hostRanks = [], noHostMarks = [], hostOnly = [];
  for (var h = 0; h < NH; h++) { hostMarks.push([]); hostRanks.push([]); hostOnly.push(0); }
  for (var r = 0; r < NR; r++) { rankMarks.push([]); if (D.rank_host[r] >= 0) hostRanks[D.rank_host[r]].push(r); }
  hostRanks.forEach(function (l) { l.sort(function (a, b) { return D.rank_slot[a] - D.rank_slot[b] || D.ranks[a] - D.ranks[b]; }); });
  for (var i = 0; i < NM; i++) {
    if (M.h[i] >= 0) { hostMarks[M.h[i]].push(i); if (M.r[i] < 0) hostOnly[M.h[i]]++; } else noHostMarks.push(i);
    if (M.r[i] >= 0) rankMarks[M.r[i]].push(i);
  }
  var rootMark = D.root && D.root.mark >= 0 ? D.root.mark : -1;
  var sampleOfMark = {};
  G.forEach(function (g) { g.samples.forEach(function (s, k) { if (s.mark >= 0) sampleOfMark[s.mark] = [g.id, k]; }); });
  var culpritRanks = {};
  (D.verdict.culprit.ranks || []).forEach(function (x) { culpritRanks[x] = true; });

  // ---------------------------------------------------------------- evidence pane
  var evBody = document.getElementById('evidence-body');
  var evAside = document.getElementById('evidence');
  function groupLink(gid, text) {
    var a = el('span', 'linkish', text != null ? text : G[gid].label);
    a.setAttribute('data-group', gid);
    a.addEventListener('click', function () { showGroup(gid); });
    return a;
  }
  function markTableRow(gid) {
    var rows = document.querySelectorAll('#group-table tbody tr');
    for (var k = 0; k < rows.length; k++) rows[k].classList.toggle('selected', +rows[k].getAttribute('data-group') === gid);
  }
  function sampleBox(g, s, picked) {
    var box = el('div', 'ev-sample' + (s.is_root ? ' is-root' : picked ? ' is-picked' : ''));
    var head = add(el('div'), el('span', 'ev-loc', s.file + ':' + s.line));
    if (s.is_root) add(head, document.createTextNode(' '), el('span', 'badge role-root', 'root event'));
    box.appendChild(head);
    var where = [];
    if (s.rank != null) where.push('rank ' + s.rank);
    if (s.host) where.push('host ' + s.host);
    if (s.gpu != null && s.gpu !== '') where.push('GPU ' + s.gpu);
    if (s.pid != null) where.push('pid ' + s.pid);
    if (s.attempt != null) where.push('attempt ' + s.attempt);
    if (s.t != null) where.push(fmtRel(s.t) + ' (' + s.ts + ', ' + s.ts_quality + ')');
    else where.push('no timestamp');
    box.appendChild(el('div', 'ev-where', where.join(' · ')));
    box.appendChild(el('pre', 'raw', s.text));
    if (s.context && s.context.length) {
      var det = el('details');
      if (s.is_root || picked) det.open = true;
      add(det, el('summary', null, 'context (' + s.context.length + ' lines)'), el('pre', 'ctx', s.context.join('\n')));
      box.appendChild(det);
    }
    var why = el('div', 'ev-fields');
    why.appendChild(document.createTextNode('rule ' + (s.rule || '—')));
    if (s.explained_by != null) {
      why.appendChild(document.createTextNode(' · explained by event ' + s.explained_by + ' '));
      if (s.explained_by_group != null) add(why, document.createTextNode('('), groupLink(s.explained_by_group, G[s.explained_by_group].name), document.createTextNode(')'));
    }
    var keys = Object.keys(s.fields || {});
    if (keys.length) why.appendChild(el('div', null, keys.map(function (k) { return k + '=' + s.fields[k]; }).join('  ')));
    box.appendChild(why);
    return box;
  }
  function showGroup(gid, markIdx) {
    if (gid == null || !G[gid]) return;
    var g = G[gid];
    evBody.textContent = '';
    var t = add(el('div', 'ev-title'), el('span', 'badge role-' + g.role, g.role), document.createTextNode(' ' + g.label));
    evBody.appendChild(t);
    evBody.appendChild(add(el('div', 'ev-meta'), document.createTextNode('signature '), el('code', null, g.signature),
      document.createTextNode(' · category ' + g.category + ' · layer ' + g.layer + (g.severity ? ' · ' + g.severity : ''))));
    var why = el('div', 'ev-why');
    why.appendChild(el('div', null, 'Why: every line here matched signature "' + g.signature + '" (' + g.category +
      ', ' + g.layer + ' layer); the correlator gave it the role "' + g.role + '" by rule' +
      (g.rules.length > 1 ? 's ' : ' ') + g.rules.map(function (x) { return '"' + x[0] + '"' + (g.rules.length > 1 ? ' ×' + fmtInt(x[1]) : ''); }).join(', ') + '.'));
    if (g.explained_by.length) {
      var eb = add(el('div'), document.createTextNode('Explained by: '));
      g.explained_by.forEach(function (x, k) { if (k) eb.appendChild(document.createTextNode(', ')); add(eb, groupLink(x[0]), document.createTextNode(' (' + fmtInt(x[1]) + ')')); });
      why.appendChild(eb);
    } else if (g.role !== 'root') {
      why.appendChild(el('div', null, 'Explained by: nothing in the chain (unexplained ' + g.role + ').'));
    }
    var outs = D.edges.filter(function (e) { return e[0] === gid; });
    if (outs.length) {
      var ex = add(el('div'), document.createTextNode('Explains: '));
      outs.forEach(function (e, k) { if (k) ex.appendChild(document.createTextNode(', ')); add(ex, groupLink(e[1]), document.createTextNode(' (' + fmtInt(e[2]) + ')')); });
      why.appendChild(ex);
    }
    evBody.appendChild(why);
    var meta = [fmtInt(g.count) + ' events'];
    if (g.n_ranks) meta.push('ranks ' + g.ranks_text);
    if (g.n_hosts) meta.push('hosts ' + g.hosts_text);
    evBody.appendChild(el('div', 'ev-meta', meta.join(' · ')));
    if (g.t_first != null) evBody.appendChild(el('div', 'ev-meta', 'first ' + fmtRel(g.t_first) + ' (' + fmtAbs(g.t_first) + '), last ' + fmtRel(g.t_last)));
    if (g.untimed) evBody.appendChild(el('div', 'ev-meta', fmtInt(g.untimed) + ' without timestamp'));
    evBody.appendChild(el('div', 'ev-meta', 'files: ' + g.files.map(function (f) { return f[0] + (g.files.length > 1 ? ' (' + fmtInt(f[1]) + ')' : ''); }).join(', ') + (g.n_files > g.files.length ? ' … ' + fmtInt(g.n_files) + ' files' : '')));
    var pickedSample = -1;
    if (markIdx != null && markIdx >= 0) {
      var sm = sampleOfMark[markIdx];
      if (sm && sm[0] === gid) pickedSample = sm[1];
      else {
        var w = ['Selected event:'];
        if (M.r[markIdx] >= 0) w.push('rank ' + rankNo(M.r[markIdx]));
        if (M.h[markIdx] >= 0) w.push('host ' + hostName(M.h[markIdx]));
        w.push(fmtRel(M.t[markIdx]) + '.');
        w.push('Its raw line is not embedded (the first ' + g.samples.length + ' of ' + fmtInt(g.count) + ' lines are).');
        evBody.appendChild(el('div', 'ev-why', w.join(' ')));
      }
    }
    evBody.appendChild(el('div', 'ev-meta', 'Evidence: ' + g.samples.length + ' of ' + fmtInt(g.count) + ' lines (' + (g.role === 'root' ? 'root first, then ' : '') + 'earliest first)'));
    g.samples.forEach(function (s, k) { evBody.appendChild(sampleBox(g, s, k === pickedSample)); });
    evAside.setAttribute('data-group', gid);
    evAside.setAttribute('data-kind', 'group');
    FF.selected = { kind: 'group', group: gid };
    markTableRow(gid);
    evAside.scrollTop = 0;
  }
  function groupsOf(list, a, b) {
    var cnt = {}, first = {};
    list.forEach(function (m) {
      if (a != null && (M.t[m] < a || M.t[m] > b)) return;
      var g = M.g[m];
      cnt[g] = (cnt[g] || 0) + 1;
      if (first[g] == null) first[g] = M.t[m];
    });
    return Object.keys(cnt).map(function (k) { return [+k, cnt[k], first[k]]; }).sort(function (x, y) { return x[2] - y[2]; });
  }
  function groupList(rows) {
    var ul = el('ul', 'ev-list');
    rows.forEach(function (x) {
      add(ul, add(el('li'), el('span', 'badge role-' + G[x[0]].role, G[x[0]].role), document.createTextNode(' '),
        groupLink(x[0], G[x[0]].name), document.createTextNode(' × ' + fmtInt(x[1]) + ' · first ' + fmtRel(x[2]))));
    });
    return ul;
  }
  function showRank(ri) {
    evBody.textContent = '';
    var role = D.topology.roles[D.topology.role[ri]];
    evBody.appendChild(add(el('div', 'ev-title'), document.createTextNode(rankWhere(ri) + ' · ' + hostName(D.rank_host[ri]))));
    evBody.appendChild(el('div', 'ev-meta', 'role in this failure: ' + TOPO_LABELS[role] + (D.topology.fr_culprits.indexOf(ri) >= 0 ? ' · named by the flight recorder' : '')));
    if (PROG && PROG.step[ri] != null) evBody.appendChild(el('div', 'ev-meta', 'last step ' + PROG.step[ri] + (PROG.t[ri] != null ? ' at ' + fmtRel(PROG.t[ri]) : '') + (PROG.median_ms[ri] != null ? ' · median step ' + PROG.median_ms[ri] + ' ms' : '')));
    var rows = groupsOf(rankMarks[ri]);
    evBody.appendChild(el('div', 'ev-meta', rows.length ? 'Events on this rank:' : 'No timed events on this rank.'));
    evBody.appendChild(groupList(rows));
    G.forEach(function (g) {
      g.samples.forEach(function (s) { if (s.rank === rankNo(ri)) evBody.appendChild(sampleBox(g, s, false)); });
    });
    evAside.setAttribute('data-kind', 'rank');
    evAside.setAttribute('data-rank', rankNo(ri));
    FF.selected = { kind: 'rank', rank: rankNo(ri) };
  }
  function showWindow(label, list, a, b) {
    evBody.textContent = '';
    evBody.appendChild(el('div', 'ev-title', label));
    evBody.appendChild(el('div', 'ev-meta', 'from ' + fmtRel(a) + ' to ' + fmtRel(b)));
    evBody.appendChild(groupList(groupsOf(list, a, b)));
    evAside.setAttribute('data-kind', 'window');
    FF.selected = { kind: 'window' };
  }
  FF.showGroup = showGroup;
  FF.showRank = function (rank) { var ri = D.ranks.indexOf(rank); if (ri >= 0) showRank(ri); };

  // Static tables and links.
  Array.prototype.forEach.call(document.querySelectorAll('[data-t]'), function (c) {
    var v = c.getAttribute('data-t'); c.textContent = v === '' ? '—' : fmtRel(+v);
  });
  Array.prototype.forEach.call(document.querySelectorAll('#group-table tbody tr, tr.link-row, a.jump'), function (row) {
    row.addEventListener('click', function (ev) { ev.preventDefault(); showGroup(+row.getAttribute('data-group')); });
  });
  var is = document.getElementById('inputs-stats');
  if (is) is.textContent = JSON.stringify({ inputs: D.inputs, stats: D.stats }, null, 2);

  // ---------------------------------------------------------------- chart plumbing
  var pending = 0;
  function chart(id) {
    var c = echarts.init(document.getElementById(id), null, { renderer: 'canvas' });
    FF.charts[id] = c;
    pending++;
    var done = false;
    c.on('finished', function () { if (!done) { done = true; pending--; maybeReady(); } });
    return c;
  }
  function maybeReady() {
    if (pending > 0 || FF.ready || !FF.setup) return;
    FF.ready = true;
    FF.timings.ready_ms = Math.round(performance.now());
    document.documentElement.setAttribute('data-ready', '1');
  }
  // Resize the charts once the window has settled, and only those whose box did change. A
  // full-page screenshot (or a browser's print preview) resizes the viewport for an instant; an
  // ECharts resize run then, beside a CPU hog, once threw inside its axis-break layout ('Cannot
  // read properties of null', copying a label's transform that was not laid out yet).
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    if (resizeTimer) clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      resizeTimer = null;
      Object.keys(FF.charts).forEach(function (k) {
        var c = FF.charts[k], d = c.getDom();
        if (d.clientWidth !== c.getWidth() || d.clientHeight !== c.getHeight()) c.resize();
      });
    }, 120);
  });

  // ---------------------------------------------------------------- timeline
  function buildTimeline() {
    var box = document.getElementById('timeline');
    var note = document.getElementById('timeline-note');
    var clk = document.getElementById('timeline-clock');
    clk.textContent = D.t0 == null ? '' : (D.t0_is_root ? 'time relative to the root event (' + D.t0_utc + ')' : 'time relative to the first event (' + D.t0_utc + ')');
    if (!NM && !(PROG && PROG.t.some(function (x) { return x != null; }))) {
      box.style.height = '60px';
      box.textContent = 'No timed events: nothing to place on a clock.';
      return;
    }
    var MARK_MAX = 300, GROUP_HOSTS = NH > 40 ? Math.ceil(NH / 32) : 0;
    var pinned = {};
    (D.topology.culprit_hosts || []).forEach(function (x) { pinned[x] = true; });
    if (rootMark >= 0 && M.h[rootMark] >= 0) pinned[M.h[rootMark]] = true;
    var nodes = {};
    function node(key, label, kind, ref, depth, kids) {
      var n = { key: key, label: label, kind: kind, ref: ref, depth: depth, kids: kids, open: false };
      nodes[key] = n; return n;
    }
    function hostNode(hi, depth, star) {
      var kids = function () {
        var out = hostRanks[hi].map(function (ri) { return node('r' + ri, rankWhere(ri), 'rank', ri, depth + 1, null); });
        if (hostOnly[hi]) out.unshift(node('o' + hi, D.hosts[hi] + ' · host-level', 'hostonly', hi, depth + 1, null));
        return out;
      };
      var n = node((star ? 'p' : 'h') + hi, (star ? '★ ' : '') + D.hosts[hi] + ' (' + hostRanks[hi].length + ' ranks)', 'host', hi, depth,
        hostRanks[hi].length || hostOnly[hi] ? kids : null);
      return n;
    }
    var top = [];
    Object.keys(pinned).forEach(function (hi) { if (GROUP_HOSTS) top.push(hostNode(+hi, 0, true)); });
    if (GROUP_HOSTS) {
      for (var a = 0; a < NH; a += GROUP_HOSTS) {
        (function (a0, b0) {
          var hs = []; for (var k = a0; k < b0; k++) hs.push(k);
          var nr = hs.reduce(function (s, k) { return s + hostRanks[k].length; }, 0);
          top.push(node('g' + a0, D.hosts[a0] + ' … ' + D.hosts[b0 - 1] + ' (' + fmtInt(nr) + ' ranks)', 'group', hs, 0,
            function () { return hs.map(function (k) { return hostNode(k, 1, false); }); }));
        })(a, Math.min(NH, a + GROUP_HOSTS));
      }
    } else {
      for (var hh = 0; hh < NH; hh++) top.push(hostNode(hh, 0, false));
    }
    if (noHostMarks.length) top.push(node('n', '(no host: launcher, scheduler)', 'nohost', null, 0, null));
    // Open by default: everything for small jobs; the culprit's host otherwise.
    top.forEach(function (n) {
      if (n.kind === 'host' && n.kids && (NR <= 16 || pinned[n.ref] && (GROUP_HOSTS || NH <= 8))) n.open = true;
    });

    function laneList(n) {
      if (n.kind === 'host') return hostMarks[n.ref];
      if (n.kind === 'rank') return rankMarks[n.ref];
      if (n.kind === 'nohost') return noHostMarks;
      if (n.kind === 'hostonly') return hostMarks[n.ref].filter(function (m) { return M.r[m] < 0; });
      return null; // group: many lists
    }
    function laneLists(n) {
      if (n.kind === 'group') return n.ref.map(function (k) { return hostMarks[k]; });
      return [laneList(n)];
    }
    function laneRanks(n) {
      if (n.kind === 'rank') return [n.ref];
      if (n.kind === 'host') return hostRanks[n.ref];
      if (n.kind === 'group') { var out = []; n.ref.forEach(function (k) { out = out.concat(hostRanks[k]); }); return out; }
      return [];
    }
    var lanes = [];
    function flatten() {
      lanes = [];
      (function walk(list) {
        list.forEach(function (n) {
          lanes.push(n);
          if (n.open && n.kids) { if (!n.kidNodes) n.kidNodes = n.kids(); walk(n.kidNodes); }
        });
      })(top);
      lanes.forEach(function (n, k) {
        n.idx = k;
        if (n.total == null) n.total = laneLists(n).reduce(function (s, l) { return s + l.length; }, 0);
        if (n.prog === undefined) n.prog = progressOf(n);
      });
    }
    function progressOf(n) {
      if (!PROG) return null;
      var rs = laneRanks(n), lo = Infinity, hi = -Infinity, smin = Infinity, smax = -Infinity;
      rs.forEach(function (ri) {
        var t = PROG.t[ri], s = PROG.step[ri];
        if (t == null || s == null) return;
        if (t < lo) lo = t; if (t > hi) hi = t;
        if (s < smin) smin = s; if (s > smax) smax = s;
      });
      return lo === Infinity ? null : [lo, hi, smin, smax];
    }
    // X extent: every mark and every last-step time, padded.
    var xmin = Infinity, xmax = -Infinity;
    if (NM) { xmin = M.t[0]; xmax = M.t[NM - 1]; }
    if (PROG) PROG.t.forEach(function (t) { if (t != null) { if (t < xmin) xmin = t; if (t > xmax) xmax = t; } });
    var span = Math.max(xmax - xmin, 1);
    var breaks = quietGaps(span);
    var shownSpan = span - breaks.reduce(function (s, b) { return s + b.end - b.start; }, 0);
    xmin -= shownSpan * 0.03; xmax += shownSpan * 0.03;
    var win = [xmin, xmax];
    // Long silences (a 10-minute PG timeout between the root and the cascade) would squash
    // everything into two slivers: cut them out of the axis (ECharts axis breaks; click the
    // zigzag to expand one).
    function quietGaps(total) {
      var ts = [];
      for (var k = 0; k < NM; k++) ts.push(M.t[k]);
      if (PROG) PROG.t.forEach(function (t) { if (t != null) ts.push(t); });
      ts.sort(function (a, b) { return a - b; });
      var gaps = [];
      for (var k2 = 1; k2 < ts.length; k2++) if (ts[k2] - ts[k2 - 1] > 5000) gaps.push([ts[k2 - 1], ts[k2]]);
      gaps.sort(function (a, b) { return (b[1] - b[0]) - (a[1] - a[0]); });
      // Greedy: cut the longest silence while it is over 15% of what is still shown.
      var cut = [], rest = total;
      for (var g = 0; g < gaps.length && cut.length < 4; g++) {
        var len = gaps[g][1] - gaps[g][0];
        if (len < rest * 0.15) break;
        cut.push(gaps[g]); rest -= len;
      }
      var pad = Math.max(rest * 0.04, 50);
      return cut.filter(function (x) { return x[1] - x[0] > 4 * pad; })
        .map(function (x) { return { start: x[0] + pad, end: x[1] - pad, gap: '3%' }; })
        .sort(function (a, b) { return a.start - b.start; });
    }
    function lowerBound(list, x) {
      var lo = 0, hi = list.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (M.t[list[mid]] < x) lo = mid + 1; else hi = mid; }
      return lo;
    }
    function upperBound(arr, x) {
      var lo = 0, hi = arr.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] <= x) lo = mid + 1; else hi = mid; }
      return lo;
    }
    // Bin edges in *pixel* space (one bin per 4 px of the plot), mapped back to times through the
    // axis, so a band is as fine on both sides of an axis break and at every zoom level.
    function binEdges() {
      var edges = [];
      if (chartObj) {
        var left = GRID_LEFT, right = chartObj.getWidth() - gridRight();
        for (var px = left; px <= right + 0.1; px += 4) edges.push(chartObj.convertFromPixel({ xAxisIndex: 0 }, px));
        if (edges.length > 1 && edges.every(function (e, k) { return k === 0 || e > edges[k - 1]; })) return edges;
      }
      edges = [];
      for (var b = 0; b <= 200; b++) edges.push(win[0] + (win[1] - win[0]) * b / 200);
      return edges;
    }
    function seriesData() {
      var per = { root: [], cascade: [], teardown: [], noise: [] }, prog = [];
      var edges = binEdges(), nb = edges.length - 1, lo0 = edges[0], hi0 = edges[nb];
      lanes.forEach(function (n) {
        var lists = laneLists(n);
        if (n.total <= MARK_MAX) {
          lists.forEach(function (l) { l.forEach(function (m) { per[G[M.g[m]].role].push([M.t[m], n.idx, M.t[m], 1, 0, m]); }); });
        } else {
          var counts = new Float64Array(nb * 4);
          lists.forEach(function (l) {
            for (var k = lowerBound(l, lo0); k < l.length && M.t[l[k]] <= hi0; k++) {
              var m = l[k], role = G[M.g[m]].role;
              if (role === 'root') { per.root.push([M.t[m], n.idx, M.t[m], 1, 0, m]); continue; }
              var b = Math.max(0, Math.min(nb - 1, upperBound(edges, M.t[m]) - 1));
              counts[b * 4 + ROLES.indexOf(role)]++;
            }
          });
          var mx = 1;
          for (var c = 0; c < counts.length; c++) if (counts[c] > mx) mx = counts[c];
          for (var b2 = 0; b2 < nb; b2++) {
            for (var ro = 1; ro < 4; ro++) {
              var cnt = counts[b2 * 4 + ro];
              if (cnt) per[ROLES[ro]].push([edges[b2], n.idx, edges[b2 + 1], cnt, 1, mx]);
            }
          }
        }
        if (n.prog) prog.push([n.prog[0], n.idx, n.prog[1], n.prog[2], n.prog[3], laneRanks(n).length]);
      });
      return { per: per, prog: prog };
    }
    function refreshData() {
      var sd = seriesData();
      var upd = ROLES.map(function (r) { return { id: r, data: sd.per[r] }; });
      upd.push({ id: 'last step', data: sd.prog });
      chartObj.setOption({ series: upd });
    }
    function rowOf(role) { return { cascade: 0, teardown: 1, noise: 2 }[role] || 0; }
    function renderEvent(params, api) {
      var role = ROLES[params.seriesIndex];
      var lane = api.value(1), kind = api.value(4);
      var p0 = api.coord([api.value(0), lane]);
      var lh = api.size([0, 1])[1];
      var cs = params.coordSys;
      var clip = { x: cs.x, y: cs.y, width: cs.width, height: cs.height };
      if (kind === 0) {
        if (role === 'root') {
          var s = Math.max(7, Math.min(11, lh * 0.45));
          if (p0[0] < cs.x - s || p0[0] > cs.x + cs.width + s) return null;
          return { type: 'polygon', shape: { points: [[p0[0], p0[1] - s], [p0[0] + s, p0[1]], [p0[0], p0[1] + s], [p0[0] - s, p0[1]]] },
            style: { fill: COLORS.root, stroke: '#000', lineWidth: 1.5 }, z2: 100 };
        }
        // Each role keeps its own band of the lane (cascade above, tear-down below), so marks
        // at the same instant (coarse timestamps are common) never hide one another.
        var hgt = lh * 0.4, off = { cascade: -0.19, teardown: 0.19, noise: 0 }[role] * lh;
        var rect = echarts.graphic.clipRectByRect({ x: p0[0] - 1.5, y: p0[1] + off - hgt / 2, width: 3, height: hgt }, clip);
        return rect && { type: 'rect', shape: rect, style: { fill: COLORS[role], opacity: 0.85 } };
      }
      var p1 = api.coord([api.value(2), lane]);
      var band = lh * 0.8, rowH = band / 3;
      var op = 0.25 + 0.75 * Math.log1p(api.value(3)) / Math.log1p(api.value(5));
      var r2 = echarts.graphic.clipRectByRect({ x: p0[0], y: p0[1] - band / 2 + rowOf(role) * rowH, width: Math.max(p1[0] - p0[0], 1.5), height: rowH }, clip);
      return r2 && { type: 'rect', shape: r2, style: { fill: COLORS[role], opacity: op } };
    }
    function renderProg(params, api) {
      var lane = api.value(1);
      var p0 = api.coord([api.value(0), lane]), p1 = api.coord([api.value(2), lane]);
      var lh = api.size([0, 1])[1], cs = params.coordSys;
      var y = p0[1] + lh * 0.5 - 4;
      var r = echarts.graphic.clipRectByRect({ x: p0[0] - 1.5, y: y, width: Math.max(p1[0] - p0[0], 0) + 3, height: 3 }, { x: cs.x, y: cs.y, width: cs.width, height: cs.height });
      if (!r) return null;
      var s0 = api.value(3), s1 = api.value(4);
      var kids = [{ type: 'rect', shape: r, style: { fill: '#57606a' } }];
      if (lh >= 13) {
        var txt = 'step ' + s0 + (s1 !== s0 ? '–' + s1 : '');
        var left = p0[0] - cs.x > 60;
        var tx = left ? p0[0] - 4 : Math.max(p1[0], cs.x) + 4;
        if (tx > cs.x && tx < cs.x + cs.width - 10) {
          kids.push({ type: 'text', x: tx, y: y + 1, style: { text: txt, fill: '#57606a', font: '9px sans-serif', align: left ? 'right' : 'left', verticalAlign: 'middle' } });
        }
      }
      return { type: 'group', children: kids };
    }
    var chartObj = null, GRID_LEFT = 250, yZoom = false;
    var culpritStops = [];
    if (PROG) D.ranks.forEach(function (r, ri) {
      if (culpritRanks[r] && PROG.t[ri] != null && culpritStops.length < 4) culpritStops.push({ xAxis: PROG.t[ri], name: 'rank ' + r + ' last step ' + PROG.step[ri] });
    });
    function gridRight() { return yZoom ? 34 : 16; }
    var rootT = rootMark >= 0 ? M.t[rootMark] : null;
    var untimed = D.n_events - NM;
    function option(resetZoom) {
      flatten();
      note.textContent = fmtInt(NM) + ' timed events in ' + fmtInt(lanes.length) + ' lanes' + (GROUP_HOSTS ? ' (' + fmtInt(NH) + ' hosts aggregated ' + GROUP_HOSTS + ' per lane; expand a group for its hosts)' : '') +
        (untimed > 0 ? ' · ' + fmtInt(untimed) + ' events without a timestamp are not drawn' : '') + '.';
      var nL = lanes.length;
      var laneH = nL <= 24 ? 26 : nL <= 48 ? 18 : 16;
      var shown = Math.min(nL, 44);
      box.style.height = Math.max(180, shown * laneH + 64) + 'px';
      if (chartObj) chartObj.resize();
      yZoom = nL > shown;
      var series = ROLES.map(function (role, k) {
        var s = { id: role, name: role, type: 'custom', renderItem: renderEvent, data: [], encode: { x: [0, 2], y: 1 },
          itemStyle: { color: COLORS[role] }, animation: false, large: false, progressive: 0, z: role === 'root' ? 10 : 2 };
        if (role === 'root' && rootT != null) {
          s.markLine = { symbol: 'none', silent: true, animation: false, data: [{ xAxis: rootT }],
            lineStyle: { color: COLORS.root, type: 'dashed', width: 1.5 }, label: { formatter: 'root', color: COLORS.root, position: 'insideEndTop' } };
        }
        return s;
      });
      var ps = { id: 'last step', name: 'last step', type: 'custom', renderItem: renderProg, data: [], encode: { x: [0, 2], y: 1 },
        itemStyle: { color: '#57606a' }, animation: false, progressive: 0, z: 1 };
      // No root line (a hang, a straggler): where the culprit stopped is the key instant.
      if (rootT == null && culpritStops.length) {
        ps.markLine = { symbol: 'none', silent: true, animation: false, data: culpritStops,
          lineStyle: { color: COLORS.root, type: 'dashed', width: 1.5 }, label: { color: COLORS.root, position: 'insideEndTop', formatter: function (p) { return p.name; } } };
      }
      series.push(ps);
      // Wheel zoom is ours (see onWheel): ECharts zooms in value space, which with axis breaks
      // dives into the cut-out silence. Dragging still pans.
      var dz = [{ type: 'inside', xAxisIndex: 0, filterMode: 'weakFilter', zoomOnMouseWheel: false, moveOnMouseWheel: false, moveOnMouseMove: true }];
      if (nL > shown) dz.push({ type: 'slider', yAxisIndex: 0, filterMode: 'weakFilter', width: 12, right: 6, startValue: 0, endValue: shown - 1, showDetail: false, zoomLock: true });
      var opt = {
        animation: false,
        grid: { left: GRID_LEFT, right: gridRight(), top: 26, bottom: 28 },
        legend: { top: 0, right: 10, itemWidth: 12, itemHeight: 8, data: ROLES.concat(['last step']) },
        tooltip: { trigger: 'item', confine: true, formatter: tip, enterable: false },
        xAxis: { type: 'value', min: xmin, max: xmax, scale: true, axisLabel: { formatter: fmtAxis, hideOverlap: true }, splitLine: { lineStyle: { color: '#eef1f4' } },
          breaks: breaks, breakArea: { show: true, expandOnClick: true, itemStyle: { color: '#f6f8fa', borderColor: '#afb8c1', borderType: 'dashed' } } },
        yAxis: { type: 'category', inverse: true, data: lanes.map(function (n) { return n.key; }), triggerEvent: true,
          axisTick: { show: false }, axisLine: { onZero: false, lineStyle: { color: '#d0d7de' } }, splitLine: { show: true, lineStyle: { color: '#f0f2f4' } },
          axisLabel: { interval: 0, fontSize: 11, width: 236, overflow: 'truncate', formatter: function (key) { return laneLabel(nodes[key]); },
            rich: { c: { color: COLORS.root, fontWeight: 'bold', fontSize: 11 } } } },
        dataZoom: dz,
        series: series
      };
      if (!resetZoom && chartObj) {
        delete opt.dataZoom;
        chartObj.setOption({ yAxis: opt.yAxis, series: series, grid: opt.grid }, { replaceMerge: ['series'] });
        var have = chartObj.getOption().dataZoom.length;
        if ((nL > shown) !== (have > 1)) chartObj.setOption({ dataZoom: dz }, { replaceMerge: ['dataZoom'] });
      } else {
        chartObj.setOption(opt, true);
      }
      refreshData();
    }
    function laneLabel(n) {
      var pad = new Array(n.depth + 1).join('    ');
      var mark = n.kids ? (n.open ? '▾ ' : '▸ ') : '   ';
      var txt = rich(pad + mark + n.label);
      return n.key.charAt(0) === 'p' || (n.kind === 'rank' && culpritRanks[rankNo(n.ref)]) ? '{c|' + txt + '}' : txt;
    }
    // A mark whose lane a re-render took away (a toggle between hover and click): events (kind
    // 0) carry their own index and need no lane; lane spans and last steps do.
    function laneGone(p) { var v = p.value; return !lanes[v[1]] && (p.seriesName === 'last step' || v[4] !== 0); }
    function tip(p) {
      var v = p.value;
      if (!v || laneGone(p)) return '';
      var n = lanes[v[1]];
      if (p.seriesName === 'last step') {
        return esc(n.label) + '<br>last step ' + esc(v[3] + (v[4] !== v[3] ? '–' + v[4] : '')) + ' reported ' + esc(fmtRel(v[0]) + (v[2] !== v[0] ? ' … ' + fmtRel(v[2]) : '')) + '<br>' + fmtInt(v[5]) + ' ranks';
      }
      if (v[4] === 0) {
        var m = v[5], g = G[M.g[m]];
        return '<b>' + esc(g.role) + '</b> · ' + esc(g.name) + '<br>' + (M.r[m] >= 0 ? 'rank ' + esc(rankNo(M.r[m])) + ' · ' : '') + esc(hostName(M.h[m])) +
          '<br>' + esc(fmtRel(M.t[m])) + ' · ' + esc(fmtAbs(M.t[m])) + '<br><span style="color:#888">click for evidence</span>';
      }
      return esc(n.label) + '<br><b>' + esc(p.seriesName) + '</b>: ' + fmtInt(v[3]) + ' events<br>' + esc(fmtRel(v[0])) + ' … ' + esc(fmtRel(v[2])) + '<br><span style="color:#888">click to list them</span>';
    }
    chartObj = chart('timeline');
    option(true);
    chartObj.on('click', function (p) {
      // Re-render after ECharts has finished dispatching this click, not inside it: a lane toggle
      // made from within the dispatch once left ECharts iterating series the re-render replaced
      // ('Cannot read properties of null', thrown inside its eachSeriesByType, beside a CPU hog).
      if (p.componentType === 'yAxis') { var key = p.value; setTimeout(function () { toggle(key); }, 0); return; }
      if (p.componentType !== 'series' || !p.value) return;
      if (laneGone(p)) return;
      var v = p.value;
      if (p.seriesName === 'last step') { var rr = laneRanks(lanes[v[1]]); if (rr.length === 1) showRank(rr[0]); return; }
      if (v[4] === 0) { showGroup(M.g[v[5]], v[5]); return; }
      var n = lanes[v[1]], all = [];
      laneLists(n).forEach(function (l) { for (var k = lowerBound(l, v[0]); k < l.length && M.t[l[k]] <= v[2]; k++) all.push(l[k]); });
      showWindow(n.label, all, v[0], v[2]);
    });
    chartObj.on('axisbreakchanged', function () { refreshData(); });
    function setWindow(a, e) { chartObj.dispatchAction({ type: 'dataZoom', dataZoomIndex: 0, startValue: a, endValue: e }); }
    // Zoom around the time under the cursor; convertFromPixel knows about the axis breaks.
    function onWheel(ev) {
      var b = box.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top;
      if (!chartObj.containPixel({ gridIndex: 0 }, [x, y])) return;
      ev.preventDefault();
      var v = chartObj.convertFromPixel({ xAxisIndex: 0 }, x);
      var f = ev.deltaY < 0 ? 0.7 : 1 / 0.7;
      var a = v - (v - win[0]) * f, e = v + (win[1] - v) * f;
      if (a < xmin) { e = Math.min(xmax, e + xmin - a); a = xmin; }
      if (e > xmax) { a = Math.max(xmin, a - (e - xmax)); e = xmax; }
      // A window edge inside a cut-out silence would make ECharts drop that cut and go linear
      // again (the cursor then sits over empty time): treat the silence as zero-width instead.
      breaks.forEach(function (bk) {
        if (a > bk.start && a < bk.end) a = Math.max(xmin, bk.end - (e - bk.end) * 0.02);
        if (e > bk.start && e < bk.end) e = Math.min(xmax, bk.start + (bk.start - a) * 0.02);
      });
      if (e - a < 2) return;
      setWindow(a, e);
    }
    box.addEventListener('wheel', onWheel, { passive: false, capture: true });
    box.addEventListener('dblclick', function () { setWindow(xmin, xmax); });
    var reset = document.getElementById('timeline-reset');
    if (reset) reset.addEventListener('click', function () { setWindow(xmin, xmax); });
    var zoomTimer = null;
    chartObj.on('datazoom', function () {
      if (zoomTimer) clearTimeout(zoomTimer);
      zoomTimer = setTimeout(function () {
        var dzs = (chartObj.getOption().dataZoom || [])[0];
        if (!dzs) return;
        var s = dzs.startValue != null ? dzs.startValue : xmin + (xmax - xmin) * dzs.start / 100;
        var e = dzs.endValue != null ? dzs.endValue : xmin + (xmax - xmin) * dzs.end / 100;
        if (Math.abs(s - win[0]) < 1e-6 && Math.abs(e - win[1]) < 1e-6) return;
        win = [s, e];
        refreshData();
      }, 60);
    });
    function toggle(key) {
      var n = nodes[key];
      if (!n || !n.kids) return false;
      n.open = !n.open;
      option(false);
      return true;
    }
    FF.timeline = {
      toggle: toggle,
      lanes: function () { return lanes.map(function (n) { return { key: n.key, label: n.label, kind: n.kind, open: n.open, total: n.total }; }); },
      rootLane: rootMark >= 0 ? (function () { var found = null; lanes.forEach(function (n) { if (found === null && laneLists(n).some(function (l) { return l.indexOf(rootMark) >= 0; })) found = n.label; }); return found; })() : null,
      rootT: rootT,
      rootDrawn: function () { return chartObj.getOption().series[0].data.some(function (d) { return d[4] === 0 && d[5] === rootMark; }); },
      labelPixel: function (key) { var k = lanes.findIndex(function (n) { return n.key === key; }); return k < 0 ? null : [GRID_LEFT - 30, chartObj.convertToPixel({ yAxisIndex: 0 }, key)]; },
      window: function () { return win.slice(); },
      zoomTo: setWindow
    };
  }

  // ---------------------------------------------------------------- propagation graph
  function buildGraph() {
    var box = document.getElementById('graph');
    var gs = G.filter(function (g) { return g.col >= 0; });
    if (!gs.length) { box.style.height = '60px'; box.textContent = 'No events in the causal chain.'; return; }
    var cols = {};
    gs.forEach(function (g) { (cols[g.col] = cols[g.col] || []).push(g); });
    // No root line but a culprit (a hang: the stuck rank prints nothing): stand it in as a
    // dashed node, so the picture still starts where the verdict says the fault is.
    var cul = D.verdict.culprit.ranks || [];
    var VIRT = D.root_group == null && cul.length ? { id: 'c', col: 0, count: -1, t_first: 0, explained_by: [], role: 'root' } : null;
    if (VIRT) (cols[0] = cols[0] || []).push(VIRT);
    var colKeys = Object.keys(cols).map(Number).sort(function (a, b) { return a - b; });
    var maxN = Math.max.apply(null, colKeys.map(function (k) { return cols[k].length; }));
    var rowH = maxN > 8 ? 58 : 80;
    var W = box.clientWidth || 900;
    // Nodes are placed in the chart's own pixels, and two invisible anchors pin the corners, so
    // ECharts' fit-to-box scale is exactly 1: a non-uniform fit would squash the boxes.
    var GAP = 66, nodeW = Math.max(120, Math.min(250, (W - 40) / colKeys.length - GAP));
    var nodeH = rowH - 18;
    var anySkip = D.edges.some(function (e) { var a = G[e[0]], b = G[e[1]]; return a.col >= 0 && b.col >= 0 && (Math.abs(b.col - a.col) > 1 || b.col <= a.col); });
    var padY = nodeH / 2 + (anySkip ? 50 : 14);
    var H = Math.max(200, Math.min(900, (maxN - 1) * rowH + 2 * padY));
    box.style.height = H + 'px';
    var x0 = nodeW / 2 + 12, stepX = colKeys.length > 1 ? (W - 2 * x0) / (colKeys.length - 1) : 0;
    var pos = {};
    // Order each column by where its explainers sit (barycentre), so arrows cross less.
    var slot = {};
    colKeys.forEach(function (k, ci) {
      if (ci === 0) cols[k].sort(function (a, b) { return (b.count - a.count) || (a.t_first - b.t_first); });
      else {
        cols[k].forEach(function (g) {
          var sw = 0, sy = 0;
          g.explained_by.forEach(function (x) { if (slot[x[0]] != null) { sw += x[1]; sy += x[1] * slot[x[0]]; } });
          g._bc = sw ? sy / sw : 0;
        });
        cols[k].sort(function (a, b) { return (a._bc - b._bc) || (b.count - a.count); });
      }
      cols[k].forEach(function (g, j) {
        slot[g.id] = j - (cols[k].length - 1) / 2;
        pos[g.id] = [colKeys.length > 1 ? x0 + ci * stepX : W / 2, H / 2 + slot[g.id] * rowH];
      });
    });
    var c = chart('graph');
    var dark = function (g) { return g.role === 'cascade' || g.role === 'noise'; };
    // A cascade nothing in the chain explains (e.g. a hang: the culprit logged nothing).
    var unexplained = function (g) { return g.role === 'cascade' && !g.explained_by.length; };
    var nodes = gs.map(function (g) {
      return {
        id: String(g.id), name: String(g.id), x: pos[g.id][0], y: pos[g.id][1], value: g.count,
        symbol: 'rect', symbolSize: [nodeW, nodeH],
        itemStyle: unexplained(g) ? { color: COLORS[g.role], borderColor: '#3d444d', borderWidth: 2, borderType: 'dashed' }
          : { color: COLORS[g.role], borderColor: g.has_root ? '#000' : '#fff', borderWidth: g.has_root ? 3 : 1 },
        label: { show: true, color: dark(g) ? '#2a1d00' : '#fff', fontSize: 12, fontWeight: 'bold', lineHeight: maxN > 8 ? 13 : 15, width: nodeW - 14, overflow: 'truncate',
          formatter: rich(g.name) + (g.label.length > g.name.length ? '\n' + rich(g.label.slice(g.name.length).trim()) : '') + '\n{s|' + rich(g.signature) + '}',
          rich: { s: { fontSize: 10, fontWeight: 'normal', fontFamily: 'monospace', color: dark(g) ? '#4a3b10' : '#f4f4f4', width: nodeW - 14, overflow: 'truncate' } } }
      };
    });
    if (VIRT) {
      var cri = D.ranks.indexOf(cul[0]);
      var last = PROG && cri >= 0 && PROG.step[cri] != null ? 'last step ' + PROG.step[cri] : 'no progress seen';
      nodes.push({ id: 'c', name: 'c', x: pos.c[0], y: pos.c[1], symbol: 'rect', symbolSize: [nodeW, nodeH],
        itemStyle: { color: '#fff5f5', borderColor: COLORS.root, borderWidth: 2, borderType: 'dashed' },
        label: { show: true, color: COLORS.root, fontSize: 12, fontWeight: 'bold', lineHeight: 15, width: nodeW - 14, overflow: 'truncate',
          formatter: 'rank ' + cul.slice(0, 3).join(', ') + (cul.length > 3 ? ' …' : '') + ' (culprit)\n' + rich(D.verdict.category) + ', ' + last + '\n{s|no error line of its own}',
          rich: { s: { fontSize: 10, fontWeight: 'normal', fontFamily: 'monospace', color: '#8c2a2a' } } } });
    }
    nodes.push({ id: 'a0', name: 'a0', x: 0, y: 0, symbolSize: 0, label: { show: false }, silent: true, tooltip: { show: false } },
      { id: 'a1', name: 'a1', x: W, y: H, symbolSize: 0, label: { show: false }, silent: true, tooltip: { show: false } });
    var maxE = Math.max.apply(null, [1].concat(D.edges.map(function (e) { return e[2]; })));
    var links = D.edges.filter(function (e) { return pos[e[0]] && pos[e[1]]; }).map(function (e) {
      var skip = Math.abs(G[e[1]].col - G[e[0]].col) > 1 || G[e[1]].col <= G[e[0]].col;
      // Long arrows bow away from the middle row, where the cascade boxes they would cross sit.
      var dy = pos[e[1]][1] - pos[e[0]][1];
      var bend = !skip ? 0 : (dy > 0 ? -0.15 : 0.15);
      return { source: String(e[0]), target: String(e[1]), value: e[2],
        lineStyle: { width: 1 + 4 * Math.log1p(e[2]) / Math.log1p(maxE), curveness: bend, color: '#8c959f', opacity: 0.9 },
        label: { show: e[2] > 1, formatter: fmtInt(e[2]), fontSize: 10, color: '#3d444d', backgroundColor: '#fff', padding: [1, 3], borderRadius: 3 } };
    });
    if (VIRT) gs.forEach(function (g) {
      if (unexplained(g)) links.push({ source: 'c', target: String(g.id), lineStyle: { type: 'dashed', color: COLORS.root, width: 1.5, opacity: 0.7, curveness: 0 }, label: { show: false } });
    });
    c.setOption({
      animation: false,
      tooltip: { trigger: 'item', confine: true, formatter: function (p) {
        if (!p.data) return '';
        if (p.data.id === 'c') return 'the culprit the verdict names; it logged no error line<br><span style="color:#888">click for its progress and events</span>';
        if (p.dataType === 'edge' && p.data.source === 'c') return 'unexplained by any logged line; the verdict attributes it to the culprit';
        if (p.dataType === 'edge') return esc(G[+p.data.source].name) + ' → ' + esc(G[+p.data.target].name) + '<br>' + fmtInt(p.data.value) + ' events explained';
        var g = G[+p.data.id];
        if (!g) return '';
        return '<b>' + esc(g.role) + '</b>' + (unexplained(g) ? ' (unexplained)' : '') + ' · ' + esc(g.signature) + '<br>' + fmtInt(g.count) + ' events · ' + fmtInt(g.n_ranks) + ' ranks · ' + fmtInt(g.n_hosts) + ' hosts<br>first ' + esc(fmtRel(g.t_first)) + '<br><span style="color:#888">click for evidence</span>';
      } },
      series: [{ type: 'graph', layout: 'none', roam: true, nodeScaleRatio: 0, data: nodes, links: links, edgeSymbol: ['none', 'arrow'], edgeSymbolSize: 9,
        left: 0, right: 0, top: 0, bottom: 0, emphasis: { focus: 'adjacency' }, edgeLabel: { show: true } }]
    });
    c.on('click', function (p) {
      if (p.dataType !== 'node') return;
      if (p.data.id === 'c') { var ri = D.ranks.indexOf(cul[0]); if (ri >= 0) showRank(ri); }
      else if (G[+p.data.id]) showGroup(+p.data.id);
    });
    FF.graph = {
      nodes: function () { return nodes.filter(function (n) { return G[+n.id]; }).map(function (n) { return { id: +n.id, label: G[+n.id].label, role: G[+n.id].role }; }); },
      nodePixel: function (gid) { return pos[gid] ? c.convertToPixel({ seriesIndex: 0 }, pos[gid]) : null; }
    };
  }

  // ---------------------------------------------------------------- topology
  // A grid of coloured squares: drawn by hand on a canvas (16,384 cells in a few ms, with
  // arithmetic hit-testing), where a chart library would build one scene object per cell.
  function buildTopology() {
    var box = document.getElementById('topology');
    var T = D.topology;
    var hostsT = [];
    for (var h = 0; h < NH; h++) if (hostRanks[h].length) hostsT.push(h);
    var unplaced = 0;
    for (var r = 0; r < NR; r++) if (D.rank_host[r] < 0) unplaced++;
    box.textContent = '';
    box.style.height = 'auto';
    if (!hostsT.length) { box.textContent = 'No rank placement (rank → host) in the bundle.'; return; }
    var S = 1;
    D.rank_slot.forEach(function (x) { if (x + 1 > S) S = x + 1; });
    S = Math.min(S, 64);
    var isFr = {};
    T.fr_culprits.forEach(function (ri) { isFr[ri] = true; });
    // Legend with counts (DOM, so it is selectable text in a pasted screenshot too).
    var legend = el('div', 'topo-legend');
    T.roles.forEach(function (name) {
      if (!T.counts[name]) return;
      add(legend, add(el('span', 'chip'), el('i', 'sw'), document.createTextNode(TOPO_LABELS[name] + ' ' + fmtInt(T.counts[name]))));
      legend.lastChild.firstChild.style.background = TOPO_COLORS[name];
    });
    if (T.fr_culprits.length) add(legend, add(el('span', 'chip'), el('i', 'sw fr'), document.createTextNode('named by flight recorder ' + fmtInt(T.fr_culprits.length))));
    if (unplaced) legend.appendChild(el('span', 'chip muted', fmtInt(unplaced) + ' ranks without a known host are not shown'));
    box.appendChild(legend);
    var wrap = el('div', 'topo-wrap');
    var cv = el('canvas');
    var tipEl = el('div', 'ff-tip');
    add(wrap, cv, tipEl);
    box.appendChild(wrap);
    var W0 = wrap.clientWidth || 900;
    var wide = hostsT.length > 64;
    var LBL = wide ? 96 : 110, TOP = wide ? 4 : 22;
    var W = 1, cw, ch, hgap, vgap;
    if (!wide) {
      cw = Math.max(18, Math.min(90, Math.floor((W0 - LBL - 8) / S) - 3)); ch = 22; hgap = 3; vgap = 4;
    } else {
      W = Math.max(4, Math.min(64, Math.round(Math.sqrt(2.6 * hostsT.length / S))));
      hgap = 4; vgap = 2;
      cw = Math.max(2, Math.floor((W0 - LBL - 8 - (W - 1) * hgap) / (W * S)));
      ch = Math.max(2, cw);
    }
    var rows = Math.ceil(hostsT.length / W);
    var blockW = wide ? S * cw : S * (cw + hgap);
    var width = LBL + (wide ? W * blockW + (W - 1) * hgap : blockW) + 4;
    var height = TOP + rows * (ch + vgap) + 4;
    var dpr = window.devicePixelRatio || 1;
    cv.width = Math.ceil(width * dpr); cv.height = Math.ceil(height * dpr);
    cv.style.width = width + 'px'; cv.style.height = height + 'px';
    var ctx = cv.getContext('2d');
    ctx.scale(dpr, dpr);
    var rowOfHost = {};
    hostsT.forEach(function (hi, k) { rowOfHost[hi] = k; });
    function cellXY(ri) {
      var k = rowOfHost[D.rank_host[ri]], sl = D.rank_slot[ri];
      if (k == null || sl < 0 || sl >= S) return null;
      if (!wide) return [LBL + sl * (cw + hgap), TOP + k * (ch + vgap)];
      return [LBL + (k % W) * (blockW + hgap) + sl * cw, TOP + Math.floor(k / W) * (ch + vgap)];
    }
    var at = {}; // "x,y" cell origin -> rank index, for hit-testing
    ctx.font = '11px sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillStyle = '#57606a';
    var allPseudo = hostsT.every(function (hi) { return isPseudo[hi]; });
    if (!wide) {
      ctx.textAlign = 'center';
      for (var sl = 0; sl < S; sl++) ctx.fillText(allPseudo ? '+' + sl : 'GPU ' + sl, LBL + sl * (cw + hgap) + cw / 2, 10);
    }
    ctx.textAlign = 'right';
    var every = wide ? Math.max(1, Math.ceil(rows / Math.max(1, height / 14))) : 1;
    for (var k = 0; k < rows; k += every) {
      var hk = hostsT[wide ? k * W : k];
      var label = isPseudo[hk] ? D.hosts[hk].replace('unknown host · ', '? ') : D.hosts[hk] + (wide ? ' …' : '');
      ctx.fillStyle = T.culprit_hosts.indexOf(hk) >= 0 && !wide ? COLORS.root : '#57606a';
      ctx.font = isPseudo[hk] ? 'italic 11px sans-serif' : '11px sans-serif';
      ctx.fillText(label.length > 16 ? label.slice(0, 15) + '…' : label, LBL - 6, TOP + k * (ch + vgap) + ch / 2);
    }
    ctx.font = '11px sans-serif';
    var rings = [];
    for (var ri = 0; ri < NR; ri++) {
      var p = cellXY(ri);
      if (!p) continue;
      var code = T.role[ri];
      ctx.fillStyle = TOPO_COLORS[T.roles[code]];
      ctx.fillRect(p[0], p[1], wide ? Math.max(cw - (cw > 3 ? 1 : 0), 1) : cw, ch);
      at[p[0] + ',' + p[1]] = ri;
      if (!wide && cw >= 26) {
        ctx.fillStyle = code === 1 || code === 2 || code === 4 ? '#fff' : '#24292f';
        ctx.textAlign = 'center';
        ctx.fillText('r' + rankNo(ri), p[0] + cw / 2, p[1] + ch / 2);
      }
      if (code === 1 || isFr[ri]) rings.push([p, code === 1, isFr[ri]]);
    }
    // Culprits get a ring big enough to find at any scale; flight-recorder picks a dot.
    rings.forEach(function (x) {
      var p = x[0], cx = p[0] + cw / 2, cy = p[1] + ch / 2;
      if (x[1]) {
        ctx.strokeStyle = '#000'; ctx.lineWidth = 2;
        if (wide) { ctx.beginPath(); ctx.arc(cx, cy, Math.max(7, cw * 1.5), 0, 2 * Math.PI); ctx.stroke(); }
        else ctx.strokeRect(p[0] - 1, p[1] - 1, cw + 2, ch + 2);
      }
      if (x[2]) {
        ctx.fillStyle = '#fff'; ctx.strokeStyle = '#000'; ctx.lineWidth = 1;
        ctx.beginPath(); ctx.arc(wide ? cx : p[0] + cw - 6, wide ? cy : p[1] + 6, wide ? Math.max(2, cw / 3) : 3.5, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
      }
    });
    function hit(ev) {
      var b = cv.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top;
      var k = Math.floor((y - TOP) / (ch + vgap));
      if (k < 0 || k >= rows || (y - TOP) - k * (ch + vgap) > ch) return -1;
      var cx, sl2;
      if (!wide) { sl2 = Math.floor((x - LBL) / (cw + hgap)); cx = LBL + sl2 * (cw + hgap); if (x - cx > cw) return -1; }
      else {
        var blk = Math.floor((x - LBL) / (blockW + hgap)), inx = (x - LBL) - blk * (blockW + hgap);
        if (blk < 0 || inx > blockW) return -1;
        sl2 = Math.floor(inx / cw); cx = LBL + blk * (blockW + hgap) + sl2 * cw;
      }
      var v = at[cx + ',' + (TOP + k * (ch + vgap))];
      return v == null ? -1 : v;
    }
    cv.addEventListener('mousemove', function (ev) {
      var ri2 = hit(ev);
      if (ri2 < 0) { tipEl.style.display = 'none'; cv.style.cursor = 'default'; return; }
      cv.style.cursor = 'pointer';
      tipEl.textContent = '';
      add(tipEl, el('b', null, rankWhere(ri2)), el('div', null, hostName(D.rank_host[ri2])),
        el('div', null, TOPO_LABELS[T.roles[T.role[ri2]]] + (isFr[ri2] ? ' · flight recorder' : '')));
      if (PROG && PROG.step[ri2] != null) tipEl.appendChild(el('div', null, 'last step ' + PROG.step[ri2]));
      groupsOf(rankMarks[ri2]).slice(0, 4).forEach(function (x) { tipEl.appendChild(el('div', null, G[x[0]].name + ' × ' + fmtInt(x[1]))); });
      var b = wrap.getBoundingClientRect();
      tipEl.style.left = Math.min(ev.clientX - b.left + 14, b.width - 220) + 'px';
      tipEl.style.top = (ev.clientY - b.top + 14) + 'px';
      tipEl.style.display = 'block';
    });
    cv.addEventListener('mouseleave', function () { tipEl.style.display = 'none'; });
    cv.addEventListener('click', function (ev) { var ri2 = hit(ev); if (ri2 >= 0) showRank(ri2); });
    FF.topology = { cells: Object.keys(at).length, culprits: rings.filter(function (x) { return x[1]; }).length, wide: wide, unplaced: unplaced,
      cellPixel: function (rank) { var ri2 = D.ranks.indexOf(rank), p2 = ri2 >= 0 && cellXY(ri2); return p2 ? [p2[0] + cw / 2, p2[1] + ch / 2] : null; } };
  }

  // ---------------------------------------------------------------- progress
  function buildProgress() {
    var a = document.getElementById('progress-steps'), b = document.getElementById('progress-times');
    if (!PROG) { a.textContent = 'No training progress lines in the bundle.'; a.style.height = '40px'; b.style.display = 'none'; return; }
    var bySteps = {}, none = 0;
    PROG.step.forEach(function (s, ri) {
      if (s == null) { none++; return; }
      (bySteps[s] = bySteps[s] || []).push(ri);
    });
    var keys = Object.keys(bySteps).map(Number).sort(function (x, y) { return x - y; });
    var counts = keys.map(function (k) { return bySteps[k].length; });
    // Log scale only when one bar would otherwise flatten the rest (16,383 ranks vs 1).
    var logY = counts.length > 1 && Math.max.apply(null, counts) > 20 * Math.min.apply(null, counts);
    var c1 = chart('progress-steps');
    c1.setOption({
      animation: false,
      title: { text: 'ranks by last step reported', left: 0, textStyle: { fontSize: 12, fontWeight: 'normal' } },
      grid: { left: 60, right: 14, top: 44, bottom: 34 },
      tooltip: { trigger: 'item', formatter: function (p) {
        if (p.componentType !== 'series' || !bySteps[keys[p.dataIndex]]) return '';
        var rs = bySteps[keys[p.dataIndex]].map(rankNo);
        return 'step ' + esc(keys[p.dataIndex]) + ': ' + fmtInt(rs.length) + ' ranks<br>' + esc(rs.slice(0, 12).join(', ') + (rs.length > 12 ? ' …' : ''));
      } },
      xAxis: { type: 'category', data: keys.map(String), name: 'last step', nameLocation: 'middle', nameGap: 22 },
      yAxis: logY ? { type: 'log', logBase: 10, min: 1 } : { type: 'value', minInterval: 1 },
      series: [{ type: 'bar', data: keys.map(function (k) { return bySteps[k].length; }), itemStyle: { color: '#8c959f' }, barMaxWidth: 60,
        label: { show: keys.length <= 12, position: 'insideTop', color: '#fff', formatter: function (p) { return fmtInt(p.value); }, fontSize: 10 },
        markPoint: { symbol: 'pin', symbolSize: 34, itemStyle: { color: COLORS.root }, label: { fontSize: 9, formatter: function (p) { return p.data.name; } },
          data: keys.map(function (k, idx) {
            var cr = bySteps[k].filter(function (ri) { return culpritRanks[rankNo(ri)]; });
            return cr.length ? { name: 'r' + rankNo(cr[0]), coord: [idx, bySteps[k].length] } : null;
          }).filter(Boolean) } }]
    });
    var pts = [], cpts = [];
    PROG.median_ms.forEach(function (v, ri) { if (v != null) (culpritRanks[rankNo(ri)] ? cpts : pts).push([rankNo(ri), v]); });
    var c2 = chart('progress-times');
    c2.setOption({
      animation: false,
      title: { text: pts.length + cpts.length ? 'median step time per rank (ms)' : 'no step times reported', left: 0, textStyle: { fontSize: 12, fontWeight: 'normal' } },
      grid: { left: 60, right: 14, top: 44, bottom: 34 },
      tooltip: { trigger: 'item', formatter: function (p) { var v = p.value; return v ? 'rank ' + esc(v[0]) + ': ' + esc(v[1]) + ' ms' : ''; } },
      xAxis: { type: 'value', name: 'rank', nameLocation: 'middle', nameGap: 22, scale: true, minInterval: 1 },
      yAxis: { type: 'value', min: 0 },
      series: [{ type: 'scatter', data: pts, symbolSize: pts.length > 2000 ? 2 : 5, large: pts.length > 2000, itemStyle: { color: '#6e7781' } },
        { type: 'scatter', data: cpts, symbolSize: 8, itemStyle: { color: COLORS.root }, z: 5 }]
    });
    if (none) a.setAttribute('data-no-progress', none);
  }

  FF.timings.parse_ms = Math.round(performance.now());
  guard('timeline', buildTimeline);
  guard('graph', buildGraph);
  guard('topology', buildTopology);
  guard('progress-steps', buildProgress);
  // Open on the root's evidence; with no root line, on the culprit rank (a hang, a straggler).
  var cul0 = (D.verdict.culprit.ranks || []).length ? D.ranks.indexOf(D.verdict.culprit.ranks[0]) : -1;
  if (D.root_group != null) showGroup(D.root_group);
  else if (cul0 >= 0) showRank(cul0);
  else if (G.length) showGroup(0);
  else evBody.textContent = 'No events in the causal chain.';
  FF.setup = true;
  maybeReady();
  // 'finished' can be skipped by a chart that had nothing to draw; never hang the ready flag.
  setTimeout(function () { pending = 0; maybeReady(); }, 4000);
})();
