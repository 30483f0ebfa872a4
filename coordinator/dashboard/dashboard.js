// The meshrt dashboard: polls the coordinator's JSON every second and renders it. Everything the
// data holds (session ids, owners, layouts, op names, errors) is user input: it reaches the page
// only as text (textContent, createTextNode) or as numbers in SVG attributes, never as markup.
'use strict';

(function () {
  const POLL_MS = 1000;
  const FETCH_TIMEOUT_MS = 3000;
  const SVG_NS = 'http://www.w3.org/2000/svg';
  let selected = null;        // the session shown in detail (from the address' #session=ID)
  let explained = null;       // the session whose explain is on the page
  let autoSelected = false;   // selected by us (the newest training session), not by a click

  // The token arrived as ?token=...: the server has set its cookie, so drop it from the address
  // (and from the browser's history) at once.
  if (window.location.search.indexOf('token=') >= 0) {
    window.history.replaceState(null, '', window.location.pathname + window.location.hash);
  }

  function $(id) { return document.getElementById(id); }

  function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (className) e.className = className;
    return e;
  }

  function row(cells) {
    const tr = document.createElement('tr');
    for (const c of cells) {
      if (c instanceof Node) {
        const td = document.createElement('td');
        td.appendChild(c);
        tr.appendChild(td);
      } else {
        tr.appendChild(el('td', c));
      }
    }
    return tr;
  }

  function fillBody(table, rows, emptyText, columns) {
    const body = $(table).tBodies[0];
    body.replaceChildren();
    for (const r of rows) body.appendChild(r);
    if (rows.length === 0) {
      const td = el('td', emptyText, 'count');
      td.colSpan = columns;
      const tr = document.createElement('tr');
      tr.appendChild(td);
      body.appendChild(tr);
    }
  }

  function badge(state) {
    return el('span', state, 'state state-' + String(state).replace(/[^a-z]/g, ''));
  }

  function ms(v) {
    if (v < 1000) return v + ' ms';
    if (v < 120000) return (v / 1000).toFixed(1) + ' s';
    if (v < 7200000) return Math.round(v / 60000) + ' min';
    return (v / 3600000).toFixed(1) + ' h';
  }

  function bytes(v) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return (u === 0 ? v : v.toFixed(1)) + ' ' + units[u];
  }

  function seconds(s) {
    if (s === null || s === undefined) return '';
    if (s < 1e-3) return (s * 1e6).toFixed(0) + ' µs';
    if (s < 1) return (s * 1e3).toFixed(2) + ' ms';
    return s.toFixed(2) + ' s';
  }

  function shortId(id) { return id.length > 14 ? id.slice(0, 12) + '…' : id; }

  function sessionLink(id) {
    if (!id) return el('span', '');
    const a = el('a', shortId(id), 'mono');
    a.href = '#session=' + encodeURIComponent(id);
    a.title = id;
    return a;
  }

  function currentOp(w) {
    const a = w.activity;
    if (!a) return w.lost_why || '';
    if (!a.running) return a.step > 0 ? 'idle after step ' + a.step + ' (' + ms(a.step_ms) + ')' : '';
    let what = 'step ' + a.step + ': ' + (a.kind || 'starting');
    if (a.op) what += " in '" + a.op + "'";
    if (a.instruction_ms > 0) what += ' for ' + ms(a.instruction_ms);
    if (a.note) what += ' [' + a.note + ']';
    return what;
  }

  async function getJson(path) {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS);
    try {
      const r = await fetch(path, { cache: 'no-store', credentials: 'same-origin',
                                    signal: abort.signal });
      if (r.status === 401) throw new Error('unauthorized: open the address with ?token=TOKEN ' +
                                            '(the coordinator\'s operator token)');
      if (!r.ok) {
        let why = r.status + ' ' + r.statusText;
        try { why = (await r.json()).error || why; } catch (e) { /* not JSON */ }
        const err = new Error(why);
        err.status = r.status;
        throw err;
      }
      return await r.json();
    } finally {
      clearTimeout(timer);
    }
  }

  function renderWorkers(workers) {
    $('worker-count').textContent = '(' + workers.filter(w => w.state !== 'lost').length +
                                    ' live)';
    fillBody('workers', workers.map(w => {
      const tr = row([w.id, w.rank >= 0 ? w.rank : '', el('span', w.address, 'mono'),
                      badge(w.state), sessionLink(w.session),
                      w.coordinate.length ? '(' + w.coordinate.join(',') + ')' : '',
                      currentOp(w), ms(w.heartbeat_age_ms) + ' ago']);
      tr.className = 'worker worker-' + w.state;
      return tr;
    }), 'no workers registered', 8);
  }

  function renderSessions(sessions, waiting) {
    $('session-count').textContent = '(' + sessions.length + ')';
    fillBody('sessions', sessions.map(s => {
      const err = el('td', s.last_error, 'error');
      const tr = row([sessionLink(s.id), s.owner || '(operator)', el('span', s.mesh, 'mono'),
                      el('span', s.layout, 'mono'), badge(s.state), s.step,
                      s.steps_per_s ? s.steps_per_s.toFixed(2) : '',
                      s.last_loss !== null ? s.last_loss.toFixed(4) : '', ms(s.age_ms)]);
      tr.appendChild(err);
      tr.className = 'session' + (s.id === selected ? ' selected' : '');
      return tr;
    }), 'no sessions', 10);
    const list = $('waiting');
    list.replaceChildren();
    for (const w of waiting) list.appendChild(el('li', w));
  }

  function renderErrors(errors) {
    $('error-count').textContent = '(' + errors.length + ')';
    fillBody('errors', errors.map(e => {
      const tr = row([new Date(e.at_ms).toLocaleTimeString(), sessionLink(e.session)]);
      tr.appendChild(el('td', e.message, 'error'));
      return tr;
    }), 'none', 3);
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  // A curve as an SVG polyline over [first step, last step] x [min, max] value; returns the
  // finite points drawn.
  function renderCurve(chart, points, lineId, color) {
    chart.replaceChildren();
    const W = 720, H = 260, L = 56, R = 12, T = 12, B = 28;
    const finite = points.filter(p => p[1] !== null && isFinite(p[1]));
    chart.appendChild(svg('rect', { x: L, y: T, width: W - L - R, height: H - T - B,
                                    fill: 'none', stroke: '#dde1e7' }));
    if (finite.length === 0) return finite;
    let x0 = finite[0][0], x1 = finite[finite.length - 1][0];
    let y0 = Math.min(...finite.map(p => p[1])), y1 = Math.max(...finite.map(p => p[1]));
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
    const sx = s => L + (s - x0) / (x1 - x0) * (W - L - R);
    const sy = v => T + (y1 - v) / (y1 - y0) * (H - T - B);
    for (let i = 0; i <= 4; i++) {
      const v = y0 + (y1 - y0) * i / 4;
      chart.appendChild(svg('line', { x1: L, x2: W - R, y1: sy(v), y2: sy(v), stroke: '#eceff3' }));
      chart.appendChild(svg('text', { x: L - 6, y: sy(v) + 4, 'text-anchor': 'end',
                                      'font-size': 11, fill: '#6b7588' }, v.toFixed(3)));
    }
    const ticks = [[x0, 'start'], [Math.round((x0 + x1) / 2), 'middle'], [x1, 'end']];
    for (const [s, anchor] of ticks) {
      chart.appendChild(svg('text', { x: sx(s), y: H - 8, 'text-anchor': anchor,
                                      'font-size': 11, fill: '#6b7588' }, 'step ' + s));
    }
    chart.appendChild(svg('polyline', {
      id: lineId, fill: 'none', stroke: color, 'stroke-width': 2, 'data-count': finite.length,
      points: finite.map(p => sx(p[0]).toFixed(1) + ',' + sy(p[1]).toFixed(1)).join(' '),
    }));
    if (finite.length <= 50) {  // few points (an eval every N steps): mark each
      for (const p of finite) {
        chart.appendChild(svg('circle', { cx: sx(p[0]), cy: sy(p[1]), r: 3, fill: color }));
      }
    }
    return finite;
  }

  function renderLoss(points, lossTensor) {
    const finite = renderCurve($('loss-chart'), points, 'loss-line', '#2456c7');
    if (!lossTensor) {
      $('loss-summary').textContent = '(not a training session)';
    } else if (finite.length === 0) {
      $('loss-summary').textContent = "(no loss yet: '" + lossTensor + "' is recorded when a " +
                                      'step fetches it)';
    } else {
      const last = finite[finite.length - 1];
      $('loss-summary').textContent = "'" + lossTensor + "': " + last[1].toFixed(4) +
                                      ' at step ' + last[0] + ' (' + finite.length + ' points)';
    }
  }

  // The metrics the session's client recorded (a dev BLEU, a held-out loss): one chart each.
  function renderMetrics(metrics) {
    const box = $('metrics');
    box.replaceChildren();
    box.hidden = metrics.length === 0;
    for (const m of metrics) {
      const div = document.createElement('div');
      div.className = 'chart-box';
      const h = document.createElement('h3');
      h.textContent = m.name + ' ';
      const summary = el('span', '', 'count');
      h.appendChild(summary);
      div.appendChild(h);
      const chart = svg('svg', { viewBox: '0 0 720 260', width: 720, height: 260, role: 'img',
                                 'aria-label': m.name + ' curve' });
      div.appendChild(chart);
      box.appendChild(div);
      const finite = renderCurve(chart, m.points, 'metric-' + m.name, '#1f8a4c');
      if (finite.length) {
        const last = finite[finite.length - 1], best = Math.max(...finite.map(p => p[1]));
        summary.textContent = last[1].toFixed(2) + ' at step ' + last[0] + ' (max ' +
                              best.toFixed(2) + ', ' + finite.length + ' points, from the client)';
      }
    }
  }

  function renderExplain(x) {
    const cost = x.cost;
    const totals = $('explain-totals');
    if (cost) {
      const t = cost.totals;
      totals.textContent = 'mesh ' + cost.mesh + ', rules ' + (cost.rules || '(none)') + ': ' +
          cost.tensors.length + ' tensors, ' + t.communication_steps +
          ' communication steps sending ' + bytes(t.sent_bytes) + ' per worker per step; ' +
          'predicted step time ' + seconds(t.predicted_s) + ' (serial ' + seconds(t.serial_s) +
          ', profile: ' + cost.profile.source + ')' +
          (x.planned_step_s ? '; the planner predicted ' + seconds(x.planned_step_s) : '');
      fillBody('tensors', cost.tensors.map(t => row([
        el('span', t.name, 'mono'), el('span', t.shape, 'mono'), el('span', t.layout, 'mono'),
        el('span', t.slice, 'mono')])), 'none', 4);
      fillBody('collectives', cost.collectives.map(c => row([
        c.index, el('span', c.op, 'mono'), c.kind + (c.in_step ? '' : ' (on fetch)'),
        c.mesh_dims, el('span', c.slice, 'mono'), bytes(c.sent_bytes), seconds(c.comm_s)])),
        'no communication', 7);
    } else {
      totals.textContent = 'no cost report: ' + x.cost_error;
    }
    const plan = $('plan');
    plan.textContent = x.plan;
    plan.hidden = !x.plan;
    $('explain-text').textContent = x.text;
  }

  async function renderDetail(cluster) {
    const section = $('detail');
    if (!selected) { section.hidden = true; return; }
    let s;
    try {
      s = await getJson('api/session?id=' + encodeURIComponent(selected));
    } catch (e) {
      if (e.status === 404) {  // closed: forget it
        selected = null;
        explained = null;
        section.hidden = true;
        return;
      }
      throw e;
    }
    section.hidden = false;
    $('detail-id').textContent = s.session.id;
    $('detail-summary').textContent = 'owner ' + (s.session.owner || '(operator)') + ', mesh ' +
        s.session.mesh + ', layout ' + (s.session.layout || '(replicated)') + ', ' +
        s.session.state + ', step ' + s.session.step +
        (s.session.steps_per_s ? ', ' + s.session.steps_per_s.toFixed(2) + ' steps/s' : '') +
        ', workers ' + s.session.workers.join(', ') +
        (s.session.last_error ? ' — ' + s.session.last_error : '');
    renderLoss(s.loss, s.session.loss_tensor);
    renderMetrics(s.metrics || []);
    if (explained !== selected) {
      renderExplain(await getJson('api/explain?id=' + encodeURIComponent(selected)));
      explained = selected;
    }
  }

  function selectFromAddress() {
    const m = /^#session=(.+)$/.exec(window.location.hash);
    selected = m ? decodeURIComponent(m[1]) : null;
    autoSelected = false;
  }

  // With nothing chosen, show the newest live training session (what `meshrt demo` runs).
  function autoSelect(cluster) {
    if (selected && !autoSelected) return;
    const live = cluster.sessions.filter(s => s.loss_tensor && s.state !== 'failed' &&
                                              s.state !== 'expired');
    live.sort((a, b) => a.age_ms - b.age_ms);
    const pick = live.length ? live[0].id : null;
    if (pick !== selected) { selected = pick; autoSelected = pick !== null; }
  }

  async function poll() {
    const status = $('status');
    try {
      const cluster = await getJson('api/cluster');
      autoSelect(cluster);
      renderWorkers(cluster.workers);
      renderSessions(cluster.sessions, cluster.waiting);
      renderErrors(cluster.errors);
      await renderDetail(cluster);
      status.textContent = 'updated ' + new Date(cluster.now_ms).toLocaleTimeString();
      status.className = 'status';
    } catch (e) {
      status.textContent = e.name === 'AbortError' ? 'the coordinator did not answer in time'
                                                   : String(e.message || e);
      status.className = 'status bad';
    }
    setTimeout(poll, POLL_MS);
  }

  window.addEventListener('hashchange', () => { selectFromAddress(); explained = null; });
  selectFromAddress();
  poll();
})();
