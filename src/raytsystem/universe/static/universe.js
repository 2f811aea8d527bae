/* raytsystem Universe: draws the evidence graph of one generation on a 2D canvas.
 *
 * Text from sources is data. It comes from <script type="application/json" id="rt-graph">
 * through JSON.parse and reaches the page only through textContent, text nodes and canvas
 * fillText; nothing from the graph is ever parsed as markup or run.
 *
 * Layout: deterministic start (sources on a sunflower spiral, each source's nodes packed around
 * it, seeded from node IDs), then a bounded number of Fruchterman-Reingold steps whose
 * repulsion only looks at neighbouring cells of a uniform grid, run in requestAnimationFrame
 * chunks. Drawing batches one canvas path per style and culls what is out of view; clicks are
 * hit-tested through a spatial grid. Beyond DRAW_LIMIT nodes the page lays out and draws a
 * deterministic sample and says so.
 */
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const graph = JSON.parse($("rt-graph").textContent || "{}");
  const config = JSON.parse($("rt-config").textContent || "{}");
  const API = typeof config.api_base === "string" ? config.api_base.replace(/\/+$/, "") : null;
  const served = API !== null;
  const motion = window.matchMedia ? window.matchMedia("(prefers-reduced-motion: reduce)") : null;
  const reduceMotion = () => Boolean(motion && motion.matches);
  const numberFormat = new Intl.NumberFormat("en-US");
  const fmt = (v) => numberFormat.format(v);
  const str = (v) => (v === null || v === undefined ? "" : String(v));

  // ------------------------------------------------------------------ styles and lenses
  const BG = "#0b1020";
  const DRAW_LIMIT = 30000; // nodes laid out and drawn; beyond it, a deterministic sample
  const LIST_LIMIT = 500; // rows in the list view at once
  const DETAIL_LIMIT = 4000; // nodes in view up to which they are drawn as shapes, not squares
  const LABEL_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
  const KIND_STYLE = {
    source: { color: "#7aa7ff", r: 7, shape: "circle", label: "source file" },
    note: { color: "#c792ff", r: 7, shape: "circle", label: "manual note" },
    entity: { color: "#ffd166", r: 6.5, shape: "diamond", label: "entity" },
    segment: { color: "#6f8fb0", r: 3, shape: "circle", label: "segment" },
    revision: { color: "#c59b7a", r: 4, shape: "circle", label: "revision" },
    raw: { color: "#9aa7b4", r: 4, shape: "square", label: "raw blob" },
  };
  const STATUS_STYLE = {
    confirmed: { color: "#3ddc97", r: 4.5, shape: "circle", label: "confirmed" },
    unverified: { color: "#ffb02e", r: 4.5, shape: "circle", label: "unverified" },
    disputed: { color: "#ff6bd6", r: 4.5, shape: "circle", label: "disputed" },
    retracted: { color: "#ff5a5f", r: 4.5, shape: "circle", hollow: true, label: "retracted" },
  };
  const OTHER_STYLE = { color: "#b0b8c8", r: 4, shape: "circle", label: "other" };
  const STYLE_KEYS = [
    "source", "note", "entity", "segment", "revision", "raw",
    "confirmed", "unverified", "disputed", "retracted", "claim", "other",
  ];
  const STYLES = STYLE_KEYS.map(
    (k) => KIND_STYLE[k] || STATUS_STYLE[k] || (k === "claim" ? { ...OTHER_STYLE, r: 4.5, label: "claim" } : OTHER_STYLE),
  );
  const EDGE_STYLE = {
    in_source: { color: "#50618a", alpha: 0.45, out: "in source", in: "claims" },
    evidence: { color: "#4fb3bf", alpha: 0.55, out: "evidence in segment", in: "evidence of" },
    cites: { color: "#5fd4ff", alpha: 0.85, out: "cites segment", in: "cited by" },
    in_revision: { color: "#6f8fb0", alpha: 0.45, out: "in revision", in: "segments" },
    revision_of: { color: "#c59b7a", alpha: 0.6, out: "revision of", in: "revisions" },
    raw: { color: "#9aa7b4", alpha: 0.6, out: "raw bytes", in: "raw bytes of" },
    mentions: { color: "#ffd166", alpha: 0.45, out: "mentions", in: "mentioned by" },
    links: { color: "#c792ff", alpha: 0.7, out: "links to", in: "linked from" },
    supersedes: { color: "#b388ff", alpha: 0.9, out: "supersedes", in: "superseded by" },
    retracts: { color: "#ff5a5f", alpha: 0.9, out: "retracts", in: "retracted by" },
    disputes: { color: "#ff6bd6", alpha: 0.9, out: "disputes", in: "disputed by" },
  };
  const LENSES = {
    knowledge: {
      title: "Knowledge", kinds: ["claim", "entity", "note"],
      edges: ["in_source", "mentions", "links", "supersedes", "retracts", "disputes"],
      help: "Claims, entities and notes with mentions, links, supersedes, retracts and disputes.",
    },
    evidence: {
      title: "Evidence", kinds: ["claim", "segment", "revision", "raw"],
      edges: ["evidence", "cites", "in_revision", "raw"],
      help: "Claim → segment → revision → raw blob (BLAKE3).",
    },
    sources: {
      title: "Sources", kinds: ["source", "note", "claim", "entity"],
      edges: ["in_source", "supersedes", "links", "mentions"],
      help: "Source files and manual notes with their claims.",
    },
    all: {
      title: "All", kinds: null, edges: null,
      help: "Every node and relation of the generation.",
    },
  };
  const KIND_ORDER = ["note", "source", "entity", "claim", "segment", "revision", "raw"];

  // ------------------------------------------------------------------ graph arrays
  const nodes = Array.isArray(graph.nodes) ? graph.nodes : [];
  const N = nodes.length;
  const index = new Map();
  nodes.forEach((n, i) => index.set(str(n.id), i));
  const styleOf = new Uint8Array(N);
  const kindRank = new Uint8Array(N);
  const labels = new Array(N);
  const haystack = new Array(N);
  const manual = new Uint8Array(N);
  const nodesOfStyle = STYLE_KEYS.map(() => []);
  for (let i = 0; i < N; i++) {
    const n = nodes[i];
    let key = KIND_STYLE[n.kind] ? n.kind : "other";
    if (n.kind === "claim") key = STATUS_STYLE[n.status] ? n.status : "claim";
    styleOf[i] = STYLE_KEYS.indexOf(key);
    nodesOfStyle[styleOf[i]].push(i);
    const rank = KIND_ORDER.indexOf(n.kind);
    kindRank[i] = rank < 0 ? KIND_ORDER.length : rank;
    labels[i] = str(n.label) || str(n.id);
    haystack[i] = [labels[i], str(n.statement), str(n.path), str(n.id)].join("\n").toLowerCase();
    manual[i] = n.kind === "claim" && n.authority === "manual" ? 1 : 0;
  }

  const edgeKinds = [];
  const edgeKindIndex = new Map();
  const es = [], et = [], ek = [];
  for (const e of Array.isArray(graph.edges) ? graph.edges : []) {
    const s = index.get(str(e && e.source)), t = index.get(str(e && e.target));
    if (s === undefined || t === undefined) continue;
    const kind = str(e.kind);
    let k = edgeKindIndex.get(kind);
    if (k === undefined) {
      k = edgeKinds.length;
      edgeKinds.push(kind);
      edgeKindIndex.set(kind, k);
    }
    es.push(s); et.push(t); ek.push(k);
  }
  const E = es.length;
  const ES = Int32Array.from(es), ET = Int32Array.from(et), EK = Int32Array.from(ek);
  const edgesOfKind = edgeKinds.map(() => []);
  for (let e = 0; e < E; e++) edgesOfKind[EK[e]].push(e);
  const edgeStyle = (k) => EDGE_STYLE[edgeKinds[k]] || { color: "#7c879c", alpha: 0.5, out: edgeKinds[k], in: edgeKinds[k] };

  // Adjacency (CSR): for node i, adjEdge[adjStart[i] .. adjStart[i+1]) are its edges.
  const adjStart = new Int32Array(N + 1);
  for (let e = 0; e < E; e++) { adjStart[ES[e] + 1]++; adjStart[ET[e] + 1]++; }
  for (let i = 0; i < N; i++) adjStart[i + 1] += adjStart[i];
  const adjEdge = new Int32Array(2 * E);
  {
    const fill = adjStart.slice(0, N);
    for (let e = 0; e < E; e++) { adjEdge[fill[ES[e]]++] = e; adjEdge[fill[ET[e]]++] = e; }
  }

  function hash32(s) {
    let h = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193); }
    return h >>> 0;
  }
  const unit = (i, salt) => hash32(salt + str(nodes[i].id)) / 4294967296;

  // Sampling: beyond DRAW_LIMIT, keep structure nodes and notable claims first, then by ID hash.
  const inLayout = new Uint8Array(N).fill(1);
  let sampledOut = 0;
  if (N > DRAW_LIMIT) {
    const priority = (i) => {
      const n = nodes[i];
      if (n.kind === "source" || n.kind === "note" || n.kind === "entity") return 0;
      if (n.kind === "claim" && (manual[i] || n.status !== "confirmed")) return 1;
      if (n.kind === "revision" || n.kind === "raw") return 2;
      return n.kind === "claim" ? 3 : 4;
    };
    const order = Array.from({ length: N }, (_, i) => i);
    const pr = order.map(priority), hs = order.map((i) => unit(i, "sample"));
    order.sort((a, b) => pr[a] - pr[b] || hs[a] - hs[b]);
    for (let m = DRAW_LIMIT; m < N; m++) inLayout[order[m]] = 0;
    sampledOut = N - DRAW_LIMIT;
  }

  // ------------------------------------------------------------------ layout
  const SPACING = 10; // world units between neighbouring nodes
  const GOLDEN = Math.PI * (3 - Math.sqrt(5));
  const X = new Float32Array(N), Y = new Float32Array(N);
  const group = new Int32Array(N).fill(-1);
  const layoutNodes = [];
  for (let i = 0; i < N; i++) if (inLayout[i]) layoutNodes.push(i);
  const L = Int32Array.from(layoutNodes);

  function initialLayout() {
    const roots = [];
    for (let i = 0; i < N; i++) {
      const k = nodes[i].kind;
      if (k === "source" || k === "note") { group[i] = i; roots.push(i); }
    }
    const rootOf = (id) => {
      const j = index.get(str(id));
      return j !== undefined && group[j] === j ? j : -1;
    };
    for (let i = 0; i < N; i++) {
      const k = nodes[i].kind;
      if (k === "claim" || k === "revision") group[i] = rootOf(nodes[i].source_id);
    }
    const kindIs = (k, name) => edgeKinds[k] === name;
    for (let e = 0; e < E; e++) {
      const k = EK[e], s = ES[e], t = ET[e];
      if (kindIs(k, "raw") && group[t] < 0) group[t] = group[s];
      if (kindIs(k, "in_revision") && group[s] < 0) group[s] = group[t];
    }
    const firstSegment = new Int32Array(N).fill(-1);
    for (let e = 0; e < E; e++) {
      const s = ES[e], t = ET[e];
      if (kindIs(EK[e], "evidence") && firstSegment[s] < 0 && group[s] === group[t]) firstSegment[s] = t;
    }
    const members = new Map(roots.map((r) => [r, { head: [], segs: [], loose: [], bySeg: new Map() }]));
    const floating = [];
    for (let m = 0; m < L.length; m++) {
      const i = L[m], g = group[i], bucket = members.get(g);
      if (!bucket) { floating.push(i); continue; }
      const k = nodes[i].kind;
      if (i === g || k === "revision" || k === "raw") bucket.head.push(i);
      else if (k === "segment") bucket.segs.push(i);
      else if (k === "claim" && firstSegment[i] >= 0 && inLayout[firstSegment[i]]) {
        const list = bucket.bySeg.get(firstSegment[i]) || [];
        list.push(i);
        bucket.bySeg.set(firstSegment[i], list);
      } else bucket.loose.push(i);
    }
    let cum = 0, k = 0, extent = 0;
    for (const root of roots) {
      const b = members.get(root);
      b.head.sort((a, c) => (a === root ? -1 : c === root ? 1 : kindRank[a] - kindRank[c]));
      const order = [...b.head];
      for (const seg of b.segs) { order.push(seg, ...(b.bySeg.get(seg) || [])); b.bySeg.delete(seg); }
      for (const rest of b.bySeg.values()) order.push(...rest);
      order.push(...b.loose);
      if (!order.length) continue;
      const m = order.length;
      const radius = SPACING * 1.3 * Math.sqrt(cum + m / 2);
      const angle = k * GOLDEN;
      const cx = radius * Math.cos(angle), cy = radius * Math.sin(angle);
      const phase = unit(root, "phase") * Math.PI * 2;
      for (let j = 0; j < m; j++) {
        const r = SPACING * 0.95 * Math.sqrt(j), a = j * GOLDEN + phase;
        X[order[j]] = cx + r * Math.cos(a);
        Y[order[j]] = cy + r * Math.sin(a);
      }
      extent = Math.max(extent, radius + SPACING * Math.sqrt(m));
      cum += m; k++;
    }
    // Entities (and anything without a source) sit near what they are connected to.
    floating.forEach((i, f) => {
      let sx = 0, sy = 0, c = 0;
      for (let p = adjStart[i]; p < adjStart[i + 1]; p++) {
        const e = adjEdge[p], j = ES[e] === i ? ET[e] : ES[e];
        if (group[j] >= 0 && inLayout[j]) { sx += X[j]; sy += Y[j]; c++; }
      }
      const a = unit(i, "angle") * Math.PI * 2;
      if (c) {
        X[i] = sx / c + Math.cos(a) * SPACING * 2;
        Y[i] = sy / c + Math.sin(a) * SPACING * 2;
      } else {
        const r = extent + SPACING * (4 + Math.sqrt(f));
        X[i] = r * Math.cos(f * GOLDEN);
        Y[i] = r * Math.sin(f * GOLDEN);
      }
    });
  }

  // Spring weights, per end: strong inside a source's cluster, weak across clusters, and an
  // entity is pulled towards its claims without pulling them out of their sources.
  const EWS = new Float32Array(E), EWT = new Float32Array(E);
  function edgeWeights() {
    for (let e = 0; e < E; e++) {
      const s = ES[e], t = ET[e];
      if (!inLayout[s] || !inLayout[t]) continue;
      const gs = group[s], gt = group[t];
      if (gs >= 0 && gs === gt) { EWS[e] = 1; EWT[e] = 1; }
      else if (gs < 0 && gt < 0) { EWS[e] = 0.5; EWT[e] = 0.5; }
      else if (gs < 0) EWS[e] = 0.5;
      else if (gt < 0) EWT[e] = 0.5;
      else { EWS[e] = 0.04; EWT[e] = 0.04; }
    }
  }

  const K = SPACING, CUT = 2 * K, CUT2 = CUT * CUT, K2 = K * K, SPRING = 0.5;
  const ITERATIONS = N <= 2000 ? 300 : Math.max(60, Math.round(300 * Math.sqrt(2000 / L.length)));
  const DX = new Float32Array(N), DY = new Float32Array(N);
  const cellOf = new Int32Array(L.length), items = new Int32Array(L.length);
  let cellStart = new Int32Array(1);

  /** One Fruchterman-Reingold step with grid-limited repulsion; moves at most `temp`. */
  function layoutStep(temp) {
    const n = L.length;
    if (!n) return;
    let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    for (let m = 0; m < n; m++) {
      const i = L[m];
      if (X[i] < minX) minX = X[i]; if (X[i] > maxX) maxX = X[i];
      if (Y[i] < minY) minY = Y[i]; if (Y[i] > maxY) maxY = Y[i];
    }
    let cs = CUT, gw = 0, gh = 0;
    for (;;) {
      gw = Math.floor((maxX - minX) / cs) + 1; gh = Math.floor((maxY - minY) / cs) + 1;
      if (gw * gh <= 4 * n + 4096) break;
      cs *= 1.5;
    }
    const cells = gw * gh;
    if (cellStart.length < cells + 1) cellStart = new Int32Array(cells + 1);
    else cellStart.fill(0, 0, cells + 1);
    for (let m = 0; m < n; m++) {
      const i = L[m];
      const c = Math.floor((Y[i] - minY) / cs) * gw + Math.floor((X[i] - minX) / cs);
      cellOf[m] = c; cellStart[c + 1]++;
    }
    for (let c = 0; c < cells; c++) cellStart[c + 1] += cellStart[c];
    const fill = cellStart.slice(0, cells);
    for (let m = 0; m < n; m++) items[fill[cellOf[m]]++] = L[m];
    DX.fill(0); DY.fill(0);

    const pairs = (i, q0, q1) => {
      const xi = X[i], yi = Y[i];
      let fx = 0, fy = 0;
      for (let q = q0; q < q1; q++) {
        const j = items[q];
        let dx = xi - X[j], dy = yi - Y[j];
        let d2 = dx * dx + dy * dy;
        if (d2 >= CUT2) continue;
        if (d2 < 1e-4) { dx = ((i * 7919 + j) % 17) / 17 - 0.5; dy = ((j * 104729 + i) % 13) / 13 - 0.5; d2 = dx * dx + dy * dy + 1e-4; }
        const f = (K2 / d2) * (1 - d2 / CUT2);
        fx += dx * f; fy += dy * f;
        DX[j] -= dx * f; DY[j] -= dy * f;
      }
      DX[i] += fx; DY[i] += fy;
    };
    for (let cy = 0; cy < gh; cy++) {
      for (let cx = 0; cx < gw; cx++) {
        const c = cy * gw + cx, s0 = cellStart[c], s1 = cellStart[c + 1];
        if (s0 === s1) continue;
        for (let p = s0; p < s1; p++) {
          const i = items[p];
          pairs(i, p + 1, s1);
          if (cx + 1 < gw) pairs(i, cellStart[c + 1], cellStart[c + 2]);
          if (cy + 1 < gh) {
            const b = c + gw;
            if (cx > 0) pairs(i, cellStart[b - 1], cellStart[b]);
            pairs(i, cellStart[b], cellStart[b + 1]);
            if (cx + 1 < gw) pairs(i, cellStart[b + 1], cellStart[b + 2]);
          }
        }
      }
    }
    for (let e = 0; e < E; e++) {
      const ws = EWS[e], wt = EWT[e];
      if (!ws && !wt) continue;
      const s = ES[e], t = ET[e];
      const dx = X[t] - X[s], dy = Y[t] - Y[s];
      const d = Math.sqrt(dx * dx + dy * dy);
      if (d <= K) continue;
      // A linear spring beyond length K: stars (a source and its many claims) stay discs
      // instead of collapsing, which keeps the grid cells sparse and the steps cheap.
      const f = (SPRING * (d - K)) / d;
      DX[s] += dx * f * ws; DY[s] += dy * f * ws;
      DX[t] -= dx * f * wt; DY[t] -= dy * f * wt;
    }
    for (let m = 0; m < n; m++) {
      const i = L[m];
      const len = Math.sqrt(DX[i] * DX[i] + DY[i] * DY[i]);
      if (len > 0) {
        const s = Math.min(len, temp) / len;
        X[i] += DX[i] * s; Y[i] += DY[i] * s;
      }
    }
  }

  // ------------------------------------------------------------------ view state
  const canvas = $("rt-canvas");
  const stage = $("rt-stage");
  const ctx = canvas.getContext ? canvas.getContext("2d", { alpha: false }) : null;
  const cam = { x: 0, y: 0, k: 1 };
  let W = 1, H = 1, dpr = 1;
  let lens = "knowledge";
  const vis = new Uint8Array(N); // visible in the lens (and laid out)
  const inLens = new Uint8Array(N); // in the lens (list view, also sampled-out nodes)
  const hiddenStyles = new Set();
  const isMatch = new Uint8Array(N);
  const hi = new Uint8Array(N);
  let hiActive = false;
  let matchCount = 0;
  let query = "";
  let selected = -1;
  let userMoved = false;
  let ready = false;
  let listMode = false;
  const stats = { layoutMs: 0, computeMs: 0, iterations: 0, drawMs: 0, drawnNodes: 0, firstDrawMs: 0, previews: 0 };

  function lensHasKind(i) {
    const kinds = LENSES[lens].kinds;
    return !kinds || kinds.includes(nodes[i].kind) || (!KIND_STYLE[nodes[i].kind] && nodes[i].kind !== "claim");
  }
  function lensEdgeKinds() {
    const want = LENSES[lens].edges;
    return edgeKinds.map((_, k) => k).filter((k) => !want || want.includes(edgeKinds[k]));
  }
  function computeVisibility() {
    for (let i = 0; i < N; i++) {
      inLens[i] = lensHasKind(i) && !hiddenStyles.has(styleOf[i]) ? 1 : 0;
      vis[i] = inLens[i] && inLayout[i] ? 1 : 0;
    }
    hitGridDirty = true;
  }
  function computeHighlight() {
    hi.fill(0);
    hiActive = false;
    if (query) {
      for (let i = 0; i < N; i++) if (isMatch[i]) hi[i] = 1;
      hiActive = true;
    }
    if (selected >= 0) {
      hi[selected] = 1;
      for (let p = adjStart[selected]; p < adjStart[selected + 1]; p++) {
        const e = adjEdge[p];
        hi[ES[e]] = 1; hi[ET[e]] = 1;
      }
      if (nodes[selected].kind === "claim") {
        // The whole evidence chain: segment → revision → raw blob (and the revision's source).
        for (const seg of [...outgoing(selected, "evidence"), ...outgoing(selected, "cites")]) {
          for (const rev of outgoing(seg, "in_revision")) {
            hi[rev] = 1;
            for (const j of [...outgoing(rev, "raw"), ...outgoing(rev, "revision_of")]) hi[j] = 1;
          }
        }
      }
      hiActive = true;
    }
  }

  // ------------------------------------------------------------------ drawing
  const nodeScale = (k) => Math.min(1.8, Math.max(0.4, Math.sqrt(k)));
  function shape(c, kind, x, y, r) {
    if (r < 1.8 || kind === "square") { c.rect(x - r, y - r, 2 * r, 2 * r); return; }
    if (kind === "diamond") {
      const d = r * 1.3;
      c.moveTo(x, y - d); c.lineTo(x + d, y); c.lineTo(x, y + d); c.lineTo(x - d, y); c.closePath();
      return;
    }
    c.moveTo(x + r, y); c.arc(x, y, r, 0, Math.PI * 2);
  }
  let drawQueued = false;
  function requestDraw() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => { drawQueued = false; draw(); });
  }
  function transform() {
    const k = cam.k;
    return { k, ox: W / 2 - cam.x * k, oy: H / 2 - cam.y * k };
  }

  /** Nodes in view, batched by style. Many in view: squares (fillRect is by far the cheapest
   *  primitive of a software canvas); few: circles, diamonds, hollow rings, manual rings. */
  function drawNodes(k, ox, oy, view, only, alpha) {
    const zr = nodeScale(k);
    let inView = 0;
    for (let m = 0; m < L.length; m++) {
      const i = L[m];
      if (!vis[i] || (only && !hi[i])) continue;
      const x = X[i], y = Y[i];
      if (x >= view.x0 && x <= view.x1 && y >= view.y0 && y <= view.y1) inView++;
    }
    const detailed = inView <= DETAIL_LIMIT;
    ctx.globalAlpha = alpha;
    for (let s = 0; s < STYLES.length; s++) {
      const st = STYLES[s], list = nodesOfStyle[s];
      if (!list.length) continue;
      const r = Math.max(1.2, st.r * zr);
      const paths = detailed || st.shape === "diamond";
      if (paths) ctx.beginPath();
      ctx.fillStyle = st.color;
      let count = 0;
      for (let m = 0; m < list.length; m++) {
        const i = list[m];
        if (!vis[i] || (only && !hi[i])) continue;
        const x = X[i], y = Y[i];
        if (x < view.x0 || x > view.x1 || y < view.y0 || y > view.y1) continue;
        const sx = x * k + ox, sy = y * k + oy;
        if (paths) shape(ctx, st.shape, sx, sy, r);
        else ctx.fillRect(sx - r, sy - r, 2 * r, 2 * r);
        count++;
      }
      if (!count || !paths) continue;
      if (st.hollow && r >= 1.8) {
        ctx.strokeStyle = st.color; ctx.lineWidth = Math.max(1.2, r * 0.45); ctx.stroke();
      } else ctx.fill();
    }
    // A white ring marks claims of manual authority.
    const r = 4.5 * zr + 1.6;
    if (detailed && r >= 3.5) {
      ctx.beginPath();
      let any = false;
      for (let i = 0; i < N; i++) {
        if (!manual[i] || !vis[i] || (only && !hi[i])) continue;
        const x = X[i], y = Y[i];
        if (x < view.x0 || x > view.x1 || y < view.y0 || y > view.y1) continue;
        const sx = x * k + ox, sy = y * k + oy;
        ctx.moveTo(sx + r, sy); ctx.arc(sx, sy, r, 0, Math.PI * 2);
        any = true;
      }
      if (any) { ctx.globalAlpha = alpha * 0.9; ctx.strokeStyle = "#ffffff"; ctx.lineWidth = 1.2; ctx.stroke(); }
    }
    return inView;
  }

  function drawEdges(k, ox, oy, view, only, alphaScale, width) {
    ctx.lineWidth = width;
    for (const kind of lensEdgeKinds()) {
      const list = edgesOfKind[kind], st = edgeStyle(kind);
      ctx.beginPath();
      let any = false;
      for (let m = 0; m < list.length; m++) {
        const e = list[m], a = ES[e], b = ET[e];
        if (!vis[a] || !vis[b]) continue;
        if (only && !(hi[a] && hi[b])) continue;
        const ax = X[a], ay = Y[a], bx = X[b], by = Y[b];
        if ((ax < view.x0 && bx < view.x0) || (ax > view.x1 && bx > view.x1)
          || (ay < view.y0 && by < view.y0) || (ay > view.y1 && by > view.y1)) continue;
        ctx.moveTo(ax * k + ox, ay * k + oy);
        ctx.lineTo(bx * k + ox, by * k + oy);
        any = true;
      }
      if (any) { ctx.strokeStyle = st.color; ctx.globalAlpha = Math.min(1, st.alpha * alphaScale); ctx.stroke(); }
    }
  }

  function draw() {
    if (!ctx) return;
    const t0 = performance.now();
    const { k, ox, oy } = transform();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.globalAlpha = 1;
    ctx.fillStyle = BG;
    ctx.fillRect(0, 0, W, H);
    const pad = 24 / k;
    const view = { x0: -ox / k - pad, x1: (W - ox) / k + pad, y0: -oy / k - pad, y1: (H - oy) / k + pad };
    drawEdges(k, ox, oy, view, false, hiActive ? 0.3 : 1, 1);
    let drawn = drawNodes(k, ox, oy, view, false, hiActive ? 0.3 : 1);
    if (hiActive) {
      drawEdges(k, ox, oy, view, true, 2, selected >= 0 ? 1.8 : 1.2);
      drawNodes(k, ox, oy, view, true, 1);
    }
    if (selected >= 0 && vis[selected]) {
      const sx = X[selected] * k + ox, sy = Y[selected] * k + oy;
      const r = STYLES[styleOf[selected]].r * nodeScale(k) + 5;
      ctx.globalAlpha = 1; ctx.lineWidth = 2; ctx.strokeStyle = "#ffffff";
      ctx.beginPath(); ctx.arc(sx, sy, r, 0, Math.PI * 2); ctx.stroke();
    }
    drawLabels(k, ox, oy, view);
    ctx.globalAlpha = 1;
    stats.drawMs = performance.now() - t0;
    stats.drawnNodes = drawn;
    canvas.dataset.drawnNodes = String(drawn);
    canvas.dataset.drawMs = stats.drawMs.toFixed(1);
    if (!stats.firstDrawMs) stats.firstDrawMs = performance.now();
    updateStats();
  }

  function truncate(text, max) {
    const t = text.replace(/\s+/g, " ");
    return t.length > max ? t.slice(0, max - 1) + "…" : t;
  }
  const LABEL_TIERS = [
    { kinds: ["entity", "note", "source"], minK: 0, max: 60 },
    { kinds: ["claim"], minK: 0.9, max: 56 },
    { kinds: ["segment", "revision", "raw"], minK: 1.8, max: 40 },
  ].map((t) => ({ ...t, list: [] }));
  for (let i = 0; i < N; i++) {
    const tier = LABEL_TIERS.find((t) => t.kinds.includes(nodes[i].kind));
    if (tier) tier.list.push(i);
  }

  function drawLabels(k, ox, oy, view) {
    ctx.font = LABEL_FONT;
    ctx.textBaseline = "middle";
    const CELL = 64, occupied = new Map(), MAX = 260;
    let placed = 0;
    const zr = nodeScale(k);
    const fits = (x0, y0, x1, y1) => {
      for (let cy = Math.floor(y0 / CELL); cy <= Math.floor(y1 / CELL); cy++) {
        for (let cx = Math.floor(x0 / CELL); cx <= Math.floor(x1 / CELL); cx++) {
          for (const b of occupied.get(cx + ":" + cy) || []) {
            if (x0 < b[2] && x1 > b[0] && y0 < b[3] && y1 > b[1]) return false;
          }
        }
      }
      return true;
    };
    const occupy = (box) => {
      for (let cy = Math.floor(box[1] / CELL); cy <= Math.floor(box[3] / CELL); cy++) {
        for (let cx = Math.floor(box[0] / CELL); cx <= Math.floor(box[2] / CELL); cx++) {
          const key = cx + ":" + cy;
          const list = occupied.get(key);
          if (list) list.push(box); else occupied.set(key, [box]);
        }
      }
    };
    const label = (i, max, strong) => {
      if (!vis[i] || placed >= MAX) return;
      const x = X[i], y = Y[i];
      if (x < view.x0 || x > view.x1 || y < view.y0 || y > view.y1) return;
      const faded = hiActive && !hi[i] && !strong;
      const text = truncate(labels[i], max);
      const sx = x * k + ox + STYLES[styleOf[i]].r * zr + 5, sy = y * k + oy;
      const w = ctx.measureText(text).width;
      const box = [sx - 3, sy - 9, sx + w + 3, sy + 9];
      if (box[2] < 0 || box[0] > W || box[3] < 0 || box[1] > H) return;
      if (!strong && !fits(box[0], box[1], box[2], box[3])) return;
      occupy(box);
      placed++;
      ctx.globalAlpha = faded ? 0.5 : 0.82;
      ctx.fillStyle = "#0b1020";
      ctx.fillRect(box[0], box[1], box[2] - box[0], box[3] - box[1]);
      ctx.globalAlpha = faded ? 0.4 : 1;
      const kind = nodes[i].kind;
      ctx.fillStyle = strong ? "#ffffff" : kind === "source" || kind === "note" || kind === "entity" ? STYLES[styleOf[i]].color : "#dfe7f5";
      ctx.fillText(text, sx, sy);
    };
    if (selected >= 0) label(selected, 90, true);
    if (hiActive) {
      let shown = 0;
      for (let i = 0; i < N && shown < 120; i++) if (hi[i] && i !== selected) { label(i, 56, false); shown++; }
    }
    for (const tier of LABEL_TIERS) {
      if (k < tier.minK) continue;
      for (const i of tier.list) {
        if (placed >= MAX) return;
        label(i, tier.max, false);
      }
    }
  }

  // ------------------------------------------------------------------ camera
  function resize() {
    const rect = stage.getBoundingClientRect();
    W = Math.max(1, rect.width); H = Math.max(1, rect.height);
    dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    requestDraw();
  }
  /** Fit the visible nodes into the canvas, beside or above the legend, with room on the
   *  right for labels. */
  function fit(noDraw) {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (let m = 0; m < L.length; m++) {
      const i = L[m];
      if (!vis[i]) continue;
      if (X[i] < x0) x0 = X[i]; if (X[i] > x1) x1 = X[i];
      if (Y[i] < y0) y0 = Y[i]; if (Y[i] > y1) y1 = Y[i];
    }
    if (x0 === Infinity) { cam.x = 0; cam.y = 0; cam.k = 1; if (!noDraw) requestDraw(); return; }
    const bw = Math.max(x1 - x0, SPACING * 4), bh = Math.max(y1 - y0, SPACING * 4);
    const m = 28, right = W - m - Math.min(220, W * 0.2);
    const regions = [{ x0: m, y0: m, x1: right, y1: H - m }];
    const legend = $("rt-legend");
    if (!legend.hidden) {
      const box = legend.getBoundingClientRect(), at = stage.getBoundingClientRect();
      regions[0] = { x0: box.right - at.left + m, y0: m, x1: right, y1: H - m };
      regions.push({ x0: m, y0: m, x1: right, y1: box.top - at.top - m / 2 });
    }
    let best = null, bestK = 0;
    for (const r of regions) {
      if (r.x1 - r.x0 < 120 || r.y1 - r.y0 < 120) continue;
      const k = Math.min((r.x1 - r.x0) / bw, (r.y1 - r.y0) / bh);
      if (k > bestK) { best = r; bestK = k; }
    }
    if (!best) { best = { x0: 0, y0: 0, x1: W, y1: H }; bestK = Math.min(W / bw, H / bh); }
    cam.k = Math.min(4, Math.max(0.005, bestK));
    cam.x = (x0 + x1) / 2 - ((best.x0 + best.x1) / 2 - W / 2) / cam.k;
    cam.y = (y0 + y1) / 2 - ((best.y0 + best.y1) / 2 - H / 2) / cam.k;
    if (!noDraw) requestDraw();
  }
  function zoomAt(sx, sy, factor) {
    const { k, ox, oy } = transform();
    const wx = (sx - ox) / k, wy = (sy - oy) / k;
    cam.k = Math.min(40, Math.max(0.002, k * factor));
    cam.x = wx - (sx - W / 2) / cam.k;
    cam.y = wy - (sy - H / 2) / cam.k;
    userMoved = true;
    requestDraw();
  }
  function centerOn(i) {
    if (i < 0 || !inLayout[i]) return;
    cam.x = X[i]; cam.y = Y[i];
    if (cam.k < 1.2) cam.k = 1.2;
    userMoved = true;
    requestDraw();
  }

  // ------------------------------------------------------------------ hit testing
  const HIT_CELL = 2 * SPACING;
  let hitGrid = new Map();
  let hitGridDirty = true;
  function buildHitGrid() {
    hitGrid = new Map();
    for (let m = 0; m < L.length; m++) {
      const i = L[m];
      if (!vis[i]) continue;
      const key = Math.floor(X[i] / HIT_CELL) + ":" + Math.floor(Y[i] / HIT_CELL);
      const list = hitGrid.get(key);
      if (list) list.push(i); else hitGrid.set(key, [i]);
    }
    hitGridDirty = false;
  }
  function hitTest(sx, sy) {
    if (hitGridDirty) buildHitGrid();
    const { k, ox, oy } = transform();
    const wx = (sx - ox) / k, wy = (sy - oy) / k;
    const radius = Math.max(8, 7.5 * nodeScale(k) + 3) / k;
    let best = -1, bestD = radius * radius;
    for (let cy = Math.floor((wy - radius) / HIT_CELL); cy <= Math.floor((wy + radius) / HIT_CELL); cy++) {
      for (let cx = Math.floor((wx - radius) / HIT_CELL); cx <= Math.floor((wx + radius) / HIT_CELL); cx++) {
        for (const i of hitGrid.get(cx + ":" + cy) || []) {
          const d = (X[i] - wx) ** 2 + (Y[i] - wy) ** 2;
          if (d < bestD || (d === bestD && best >= 0 && kindRank[i] < kindRank[best])) { best = i; bestD = d; }
        }
      }
    }
    return best;
  }

  // ------------------------------------------------------------------ DOM helpers
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "class") node.className = value;
      else if (key === "onclick") node.addEventListener("click", value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) if (child !== null && child !== undefined && child !== false) node.append(child);
    return node;
  }
  const swatch = (style) => {
    const s = el("span", { class: "sw" + (style.shape === "square" ? " square" : style.shape === "diamond" ? " diamond" : "") + (style.hollow ? " hollow" : ""), "aria-hidden": "true" });
    s.style.background = style.color;
    s.style.color = style.color;
    return s;
  };
  const hashEl = (value) => el("span", { class: "hash", text: str(value) });
  function kv(pairs) {
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      dl.append(el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : document.createTextNode(str(v))));
    }
    return dl;
  }
  function nodeButton(j, text) {
    return el("button", {
      type: "button", class: "linklike", title: str(nodes[j].id),
      text: text || truncate(labels[j], 90),
      onclick: () => select(j, { center: true }),
    });
  }
  function styleFor(i) { return STYLES[styleOf[i]]; }
  function kindChips(i) {
    const n = nodes[i];
    const chips = el("div", { class: "chips" });
    const kindStyle = KIND_STYLE[n.kind] || (n.kind === "claim" ? STYLES[STYLE_KEYS.indexOf("claim")] : OTHER_STYLE);
    chips.append(el("span", { class: "chip" }, swatch(n.kind === "claim" ? styleFor(i) : kindStyle), str(n.kind) || "node"));
    if (n.kind === "claim") {
      chips.append(el("span", { class: "chip" }, swatch(styleFor(i)), str(n.status) || "no status"));
      if (n.authority) chips.append(el("span", { class: "chip", text: "authority: " + n.authority }));
    }
    if (n.note_status) chips.append(el("span", { class: "chip", text: "note: " + n.note_status }));
    return chips;
  }

  // ------------------------------------------------------------------ details panel
  const panel = $("rt-panel");
  let panelToken = 0;

  function overview() {
    const gen = graph.generation || {};
    const c = graph.counts || {};
    panel.replaceChildren(
      el("h2", { text: "Generation " + str(gen.number) }),
      kv([["hash", hashEl(gen.hash)], ["schema", str(graph.schema_version)]]),
      el("h3", { text: "Counts" }),
      kv(Object.entries(c).map(([k, v]) => [k, fmt(Number(v) || 0)])),
      el("h3", { text: "Mode" }),
      el("p", {
        class: "muted",
        text: served
          ? "Served by raytsystem serve: clicking a node fetches its complete chain from the ledger (cited excerpts, SHA-256, BLAKE3)."
          : "Static file: details come from the graph embedded in this page. Run `raytsystem serve` for cited excerpts and SHA-256 checks.",
      }),
      el("h3", { text: "How to use" }),
      el("p", { class: "muted" }, "Click a node for its details and evidence chain. Drag to pan, wheel to zoom. On the canvas: ",
        el("kbd", { text: "←↑→↓" }), " pan, ", el("kbd", { text: "+" }), " ", el("kbd", { text: "−" }), " zoom, ",
        el("kbd", { text: "0" }), " fit, ", el("kbd", { text: "Esc" }), " clear. The list view is a keyboard-navigable table of the same nodes."),
    );
  }

  function neighbours(i) {
    const groups = new Map();
    for (let p = adjStart[i]; p < adjStart[i + 1]; p++) {
      const e = adjEdge[p], out = ES[e] === i, j = out ? ET[e] : ES[e];
      const st = edgeStyle(EK[e]);
      const title = out ? st.out : st.in;
      const list = groups.get(title) || [];
      list.push({ j, kind: edgeKinds[EK[e]], out });
      groups.set(title, list);
    }
    return groups;
  }
  function outgoing(i, kind) {
    const found = [];
    for (let p = adjStart[i]; p < adjStart[i + 1]; p++) {
      const e = adjEdge[p];
      if (ES[e] === i && edgeKinds[EK[e]] === kind) found.push(ET[e]);
    }
    return found;
  }

  function relationsSection(i) {
    const frag = [];
    const groups = neighbours(i);
    if (!groups.size) return frag;
    frag.push(el("h3", { text: "Relations" }));
    for (const [title, list] of groups) {
      const ul = el("ul", { class: "rel" });
      list.slice(0, 40).forEach(({ j }) => ul.append(el("li", {}, nodeButton(j))));
      if (list.length > 40) ul.append(el("li", { class: "muted", text: "… and " + fmt(list.length - 40) + " more" }));
      frag.push(el("p", { class: "muted", text: title + " (" + fmt(list.length) + ")" }), ul);
    }
    return frag;
  }

  /** The claim's chain as the graph JSON carries it: claim → segment → revision → raw. */
  function staticChain(i) {
    const n = nodes[i];
    const out = [el("h3", { text: "Evidence chain" })];
    const claimStep = el("li", {},
      el("div", { class: "step" }, "claim ", el("b", { text: str(n.id) })),
      kv([["claim hash", hashEl(n.hash)], ["source", str(n.path)]]));
    const segs = [...outgoing(i, "evidence").map((j) => [j, "statement"]), ...outgoing(i, "cites").map((j) => [j, "citation"])];
    if (!segs.length) {
      out.push(el("ol", { class: "chain" }, claimStep), el("p", { class: "muted", text: "No evidence segment in this graph." }));
      return out;
    }
    segs.forEach(([seg, role], m) => {
      const chain = el("ol", { class: "chain", "aria-label": role + " evidence " + (m + 1) });
      chain.append(claimStep.cloneNode(true));
      chain.append(el("li", {},
        el("div", { class: "step" }, role + " evidence → segment ", el("b", { text: str(nodes[seg].id) })),
        el("div", {}, nodeButton(seg))));
      for (const rev of outgoing(seg, "in_revision")) {
        const src = outgoing(rev, "revision_of")[0];
        chain.append(el("li", {},
          el("div", { class: "step" }, "revision ", el("b", { text: str(nodes[rev].id) })),
          src !== undefined ? el("div", {}, "of ", nodeButton(src)) : null));
        for (const raw of outgoing(rev, "raw")) {
          chain.append(el("li", {},
            el("div", { class: "step" }, "raw blob (BLAKE3)"),
            hashEl(nodes[raw].blake3 || nodes[raw].id)));
        }
      }
      out.push(chain);
    });
    return out;
  }

  function showNode(i) {
    const token = ++panelToken;
    const n = nodes[i];
    const parts = [kindChips(i)];
    if (n.kind === "claim") parts.push(el("p", { class: "statement", text: str(n.statement || n.label) }));
    else parts.push(el("h2", { text: labels[i] }));
    const fields = [["id", hashEl(n.id)]];
    for (const key of ["path", "description", "segment_kind", "revision_id", "source_id", "blake3"]) {
      if (n[key] !== undefined && n[key] !== null && !(n.kind === "claim" && key === "source_id")) {
        fields.push([key, key.endsWith("_id") || key === "blake3" ? hashEl(n[key]) : str(n[key])]);
      }
    }
    parts.push(kv(fields));
    if (!inLayout[i]) parts.push(el("p", { class: "muted", text: "Not drawn: sampled out to keep the view smooth." }));
    if (n.kind === "claim") parts.push(...staticChain(i));
    const remote = el("div", { id: "rt-remote" });
    parts.push(remote);
    parts.push(...relationsSection(i));
    panel.replaceChildren(...parts);
    panel.scrollTop = 0;
    const id = str(n.id);
    if (served && /^(clm|src|rev|seg|nrm|evd)_/.test(id)) loadRemote(id, remote, token);
  }

  async function fetchJson(url) {
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    let body = null;
    try { body = await response.json(); } catch (err) { body = null; }
    if (!response.ok) {
      const error = (body && body.error) || {};
      throw new Error("error[" + str(error.code || response.status) + "]: " + str(error.message || response.statusText));
    }
    return body;
  }
  async function sha256Hex(text) {
    if (!(window.crypto && crypto.subtle)) return null;
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
    return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  async function loadRemote(id, box, token) {
    box.replaceChildren(el("p", { class: "muted", text: "Loading the full chain from the ledger…" }));
    try {
      const data = await fetchJson(API + "/node/" + encodeURIComponent(id));
      if (token !== panelToken) return;
      box.replaceChildren(...(await renderShow(data)));
      box.dataset.loaded = "true";
    } catch (err) {
      if (token !== panelToken) return;
      box.replaceChildren(el("p", { class: "error", text: str(err && err.message) }));
      box.dataset.loaded = "error";
    }
  }

  /** `raytsystem show` JSON: claim states and evidence with excerpts, verified in the browser. */
  async function renderShow(data) {
    const out = [];
    if (data && data.kind === "claim") {
      out.push(el("h3", { text: "Full chain from the ledger" }));
      const states = el("ul", { class: "rel" });
      for (const s of data.states || []) {
        states.append(el("li", {},
          "generations " + str(s.from_generation) + "–" + (s.to_generation === null ? "now" : str(s.to_generation)) + ": ",
          el("b", { text: str(s.status) }), " ", hashEl(s.claim_hash)));
      }
      out.push(el("p", { class: "muted", text: "States" }), states);
      for (const ev of data.evidence || []) {
        const chain = ev.chain || {};
        const seg = chain.segment || {}, nrm = chain.normalization || {}, rev = chain.revision || {};
        const src = chain.source || {}, raw = chain.raw_blob || {};
        const excerpt = str(ev.cited_excerpt);
        const actual = await sha256Hex(excerpt);
        const check = actual === null
          ? el("span", { class: "muted", text: "(not checked: no WebCrypto here)" })
          : actual === ev.sha256
            ? el("span", { class: "ok", text: "✓ matches the excerpt (checked in this browser)" })
            : el("span", { class: "bad", text: "✗ does not match the excerpt: " + actual });
        const card = el("div", { class: "evidence-card" },
          el("div", { class: "step" }, str(ev.role) + " evidence ", hashEl(ev.id)),
          el("blockquote", { class: "excerpt", text: excerpt }),
          kv([
            ["excerpt SHA-256", el("span", {}, hashEl(ev.sha256), el("br"), check)],
            ["span", "[" + str(ev.start) + ", " + str(ev.end) + ")"],
            ["lines", seg.line_start !== undefined ? str(seg.line_start) + "–" + str(seg.line_end) : ""],
            ["segment", el("span", {}, hashEl(seg.id), " " + str(seg.kind) + (seg.heading_path && seg.heading_path.length ? " · " + seg.heading_path.join(" › ") : ""))],
            ["normalization", el("span", {}, hashEl(nrm.id), " " + str(nrm.adapter) + "@" + str(nrm.adapter_version))],
            ["revision", el("span", {}, hashEl(rev.id), " " + str(rev.media_type) + ", " + fmt(Number(rev.size) || 0) + " bytes")],
            ["source", el("span", {}, str(src.path) + " ", hashEl(src.id))],
            ["raw BLAKE3", hashEl(raw.address || rev.blob)],
          ]));
        out.push(card);
      }
    } else if (data && data.excerpt !== undefined) {
      out.push(el("h3", { text: "Excerpt" }), el("blockquote", { class: "excerpt", text: str(data.excerpt.text !== undefined ? data.excerpt.text : data.excerpt) }));
    }
    out.push(el("details", { class: "json" }, el("summary", { text: "show JSON" }), el("pre", { text: JSON.stringify(data, null, 2) })));
    return out;
  }

  async function showRemoteOnly(id) {
    const token = ++panelToken;
    const box = el("div", { id: "rt-remote" });
    panel.replaceChildren(el("h2", { text: id }), el("p", { class: "muted", text: "Not in this graph (left out by the export)." }), box);
    await loadRemote(id, box, token);
  }

  // ------------------------------------------------------------------ selection
  function select(i, opts) {
    selected = i;
    computeHighlight();
    if (i >= 0) {
      showNode(i);
      if (opts && opts.center && !listMode && inLayout[i] && vis[i]) centerOn(i);
    } else {
      panelToken++;
      overview();
    }
    if (listMode) markListSelection();
    requestDraw();
  }

  // ------------------------------------------------------------------ search
  const searchInput = $("rt-search");
  const searchCount = $("rt-search-count");
  function runSearch(text) {
    query = text.trim().toLowerCase();
    isMatch.fill(0);
    matchCount = 0;
    let inView = 0;
    if (query) {
      for (let i = 0; i < N; i++) {
        if (haystack[i].includes(query)) { isMatch[i] = 1; matchCount++; if (inLens[i]) inView++; }
      }
      searchCount.textContent = fmt(matchCount) + " match" + (matchCount === 1 ? "" : "es") + (inView !== matchCount ? " (" + fmt(inView) + " in lens)" : "");
    } else searchCount.textContent = "";
    computeHighlight();
    if (listMode) renderList();
    requestDraw();
  }
  async function searchResults() {
    const text = searchInput.value.trim();
    if (!text) { select(-1); return; }
    const token = ++panelToken;
    const local = el("ul", { class: "hits" });
    let shown = 0;
    for (let i = 0; i < N && shown < 100; i++) {
      if (isMatch[i] && inLens[i]) { local.append(el("li", {}, nodeButton(i, truncate(labels[i], 110)), el("span", { class: "muted", text: " · " + str(nodes[i].kind) })));
        shown++; }
    }
    const remote = el("div", { id: "rt-search-remote" });
    panel.replaceChildren(
      el("h2", {}, "Search: ", el("span", { text: "“" + text + "”" })),
      el("h3", { text: "Labels in this graph (" + fmt(matchCount) + ")" }),
      shown ? local : el("p", { class: "muted", text: "No label in this lens contains it." }),
      remote,
    );
    if (!served) return;
    remote.append(el("h3", { text: "Claim index of the generation" }), el("p", { class: "muted", text: "Searching…" }));
    try {
      const gen = (graph.generation && graph.generation.hash) || "";
      const data = await fetchJson(API + "/search?q=" + encodeURIComponent(text) + (gen ? "&generation=" + encodeURIComponent(gen) : ""));
      if (token !== panelToken) return;
      const ul = el("ul", { class: "hits" });
      for (const hit of data.hits || []) {
        const j = index.get(str(hit.id));
        ul.append(el("li", {},
          el("button", {
            type: "button", class: "linklike", title: str(hit.id), text: truncate(str(hit.text), 140),
            onclick: () => (j !== undefined ? select(j, { center: true }) : showRemoteOnly(str(hit.id))),
          }),
          el("div", { class: "muted", text: str(hit.source_path) + (hit.heading_path && hit.heading_path.length ? " · " + hit.heading_path.join(" › ") : "") })));
      }
      remote.replaceChildren(el("h3", { text: "Claim index of the generation (" + fmt((data.hits || []).length) + ")" }),
        (data.hits || []).length ? ul : el("p", { class: "muted", text: "No claim matches." }));
    } catch (err) {
      if (token !== panelToken) return;
      remote.replaceChildren(el("h3", { text: "Claim index of the generation" }), el("p", { class: "error", text: str(err && err.message) }));
    }
  }

  // ------------------------------------------------------------------ list view
  const listEl = $("rt-list");
  const listToggle = $("rt-list-toggle");
  const sortedOrder = Array.from({ length: N }, (_, i) => i).sort(
    (a, b) => kindRank[a] - kindRank[b] || (labels[a] < labels[b] ? -1 : labels[a] > labels[b] ? 1 : a - b),
  );
  function renderList() {
    const rows = [];
    let total = 0;
    for (const i of sortedOrder) {
      if (!inLens[i] || (query && !isMatch[i])) continue;
      total++;
      if (rows.length < LIST_LIMIT) rows.push(i);
    }
    const tbody = el("tbody");
    for (const i of rows) {
      const n = nodes[i];
      tbody.append(el("tr", { "data-index": i },
        el("td", {}, el("span", { class: "chip" }, swatch(styleFor(i)), str(n.kind))),
        el("td", { text: str(n.status || n.note_status || "") }),
        el("td", {}, el("button", { type: "button", class: "row-btn", "data-id": str(n.id), text: truncate(labels[i], 160), onclick: () => select(i) })),
        el("td", { class: "path", text: str(n.path || "") })));
    }
    const caption = fmt(total) + " node" + (total === 1 ? "" : "s") + " in the " + LENSES[lens].title + " lens"
      + (query ? " matching “" + searchInput.value.trim() + "”" : "")
      + (total > rows.length ? " — showing the first " + fmt(rows.length) + "; narrow them with search" : "");
    listEl.replaceChildren(el("table", {},
      el("caption", { text: caption }),
      el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Kind" }), el("th", { scope: "col", text: "Status" }),
        el("th", { scope: "col", text: "Label" }), el("th", { scope: "col", text: "Path" }))),
      tbody));
    markListSelection();
  }
  function markListSelection() {
    for (const tr of listEl.querySelectorAll("tr[data-index]")) {
      if (Number(tr.getAttribute("data-index")) === selected) tr.setAttribute("aria-current", "true");
      else tr.removeAttribute("aria-current");
    }
  }
  listEl.addEventListener("keydown", (ev) => {
    const btn = ev.target.closest ? ev.target.closest(".row-btn") : null;
    if (!btn) return;
    const all = Array.from(listEl.querySelectorAll(".row-btn"));
    const at = all.indexOf(btn);
    let next = -1;
    if (ev.key === "ArrowDown") next = Math.min(all.length - 1, at + 1);
    else if (ev.key === "ArrowUp") next = Math.max(0, at - 1);
    else if (ev.key === "Home") next = 0;
    else if (ev.key === "End") next = all.length - 1;
    if (next >= 0) { ev.preventDefault(); all[next].focus(); }
  });
  function setListMode(on) {
    listMode = on;
    listToggle.setAttribute("aria-pressed", on ? "true" : "false");
    listEl.hidden = !on;
    canvas.hidden = on;
    $("rt-legend").hidden = on;
    statsEl.hidden = on;
    if (on) renderList(); else { listEl.replaceChildren(); resize(); }
  }
  listToggle.addEventListener("click", () => setListMode(!listMode));

  // ------------------------------------------------------------------ header, lenses, legend, notices
  function header() {
    const gen = graph.generation || {};
    const hash = str(gen.hash);
    $("rt-gen").replaceChildren("generation ", el("b", { text: str(gen.number) }), " · ",
      el("span", { class: "mono", title: hash, text: hash.slice(0, 16) + (hash.length > 16 ? "…" : "") }));
    const c = graph.counts || {};
    const counts = $("rt-counts");
    counts.replaceChildren();
    ["sources", "claims", "entities", "nodes", "edges"].forEach((key, m) => {
      if (c[key] === undefined) return;
      if (m) counts.append(" · ");
      counts.append(el("b", { text: fmt(Number(c[key]) || 0) }), " " + key);
    });
    document.title = "raytsystem Universe · generation " + str(gen.number);
  }

  const lensBar = $("rt-lenses");
  function renderLenses() {
    lensBar.replaceChildren(...Object.entries(LENSES).map(([key, l]) => el("button", {
      type: "button", role: "tab", id: "rt-lens-" + key, "data-lens": key,
      "aria-selected": key === lens ? "true" : "false", tabindex: key === lens ? "0" : "-1",
      text: l.title, title: l.help, onclick: () => setLens(key),
    })));
    $("rt-lens-help").textContent = LENSES[lens].help;
  }
  lensBar.addEventListener("keydown", (ev) => {
    const keys = Object.keys(LENSES);
    const at = keys.indexOf(lens);
    let next = -1;
    if (ev.key === "ArrowRight") next = (at + 1) % keys.length;
    else if (ev.key === "ArrowLeft") next = (at + keys.length - 1) % keys.length;
    if (next < 0) return;
    ev.preventDefault();
    setLens(keys[next]);
    $("rt-lens-" + keys[next]).focus();
  });
  function setLens(key) {
    if (!LENSES[key]) return;
    lens = key;
    renderLenses();
    computeVisibility();
    runSearch(searchInput.value);
    renderLegend();
    if (listMode) renderList();
    requestDraw();
  }

  let legendOpen = true;
  function renderLegend() {
    const legend = $("rt-legend");
    const statusItems = el("div", { class: "items" });
    for (const key of ["confirmed", "unverified", "disputed", "retracted"]) {
      const s = STYLE_KEYS.indexOf(key);
      const shown = !hiddenStyles.has(s);
      statusItems.append(el("button", {
        type: "button", class: "item", "aria-pressed": shown ? "true" : "false",
        title: (shown ? "Hide " : "Show ") + key + " claims",
        onclick: () => { if (hiddenStyles.has(s)) hiddenStyles.delete(s); else hiddenStyles.add(s); computeVisibility(); renderLegend(); if (listMode) renderList(); requestDraw(); },
      }, swatch(STYLES[s]), key, el("span", { class: "count", text: fmt(nodesOfStyle[s].length) })));
    }
    const kindItems = el("div", { class: "items" });
    for (const key of Object.keys(KIND_STYLE)) {
      const s = STYLE_KEYS.indexOf(key);
      if (!nodesOfStyle[s].length || !(LENSES[lens].kinds === null || LENSES[lens].kinds.includes(key))) continue;
      kindItems.append(el("span", { class: "item" }, swatch(STYLES[s]), KIND_STYLE[key].label,
        el("span", { class: "count", text: fmt(nodesOfStyle[s].length) })));
    }
    if (manual.some((v) => v)) kindItems.append(el("span", { class: "item" }, el("span", { class: "sw ring", "aria-hidden": "true" }), "manual claim"));
    const edgeItems = el("div", { class: "items" });
    for (const k of lensEdgeKinds()) {
      if (!edgesOfKind[k].length) continue;
      const st = edgeStyle(k);
      const sw = el("span", { class: "sw line", "aria-hidden": "true" });
      sw.style.background = st.color;
      edgeItems.append(el("span", { class: "item" }, sw, str(st.out)));
    }
    const body = el("details", { open: legendOpen },
      el("summary", { text: "Legend" }), el("h2", { text: "Claim status" }), statusItems);
    if (kindItems.childNodes.length) body.append(el("h2", { text: "Nodes" }), kindItems);
    if (edgeItems.childNodes.length) body.append(el("h2", { text: "Relations" }), edgeItems);
    body.addEventListener("toggle", () => { legendOpen = body.open; });
    legend.replaceChildren(body);
  }

  function renderNotices() {
    const box = $("rt-notices");
    box.replaceChildren();
    const t = graph.truncated;
    if (t) {
      const notice = el("div", { class: "notice", id: "rt-truncated" });
      if (typeof t === "object") {
        notice.append(el("b", { text: "Partial graph: " }),
          fmt(Number(t.claims_left_out) || 0) + " claims were left out by the export to stay under "
          + fmt(Number(t.max_nodes) || 0) + " nodes (" + fmt(Number(t.claims_shown) || 0)
          + " claims shown). Sources, entities, manual and non-confirmed claims are always kept. "
          + "Export with a larger --max-nodes to see everything.");
      } else {
        notice.append(el("b", { text: "Partial graph: " }), "the export left some nodes out.");
      }
      box.append(notice);
    }
    if (sampledOut) {
      box.append(el("div", { class: "notice", id: "rt-sampled" }, el("b", { text: "Sampled view: " }),
        "drawing " + fmt(N - sampledOut) + " of " + fmt(N) + " nodes to stay smooth; the other "
        + fmt(sampledOut) + " are in search and the list view only."));
    }
  }

  // ------------------------------------------------------------------ stats
  const statsEl = $("rt-stats");
  function updateStats() {
    const layout = ready
      ? "layout " + fmt(Math.round(stats.layoutMs)) + " ms (" + stats.iterations + " steps)"
      : "laying out… " + stats.iterations + "/" + ITERATIONS;
    statsEl.textContent = fmt(stats.drawnNodes) + " nodes drawn · " + layout + " · draw script " + stats.drawMs.toFixed(1) + " ms";
  }

  // ------------------------------------------------------------------ input
  let drag = null;
  const tooltip = $("rt-tooltip");
  const local = (ev) => {
    const rect = canvas.getBoundingClientRect();
    return [ev.clientX - rect.left, ev.clientY - rect.top];
  };
  canvas.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    const [x, y] = local(ev);
    drag = { x, y, moved: false, id: ev.pointerId };
    canvas.setPointerCapture(ev.pointerId);
  });
  canvas.addEventListener("pointermove", (ev) => {
    const [x, y] = local(ev);
    if (drag) {
      const dx = x - drag.x, dy = y - drag.y;
      if (!drag.moved && dx * dx + dy * dy < 16) return;
      drag.moved = true;
      canvas.classList.add("dragging");
      cam.x -= dx / cam.k; cam.y -= dy / cam.k;
      drag.x = x; drag.y = y;
      userMoved = true;
      tooltip.hidden = true;
      requestDraw();
      return;
    }
    const i = hitTest(x, y);
    if (i < 0) { tooltip.hidden = true; return; }
    const n = nodes[i];
    tooltip.replaceChildren(el("div", { text: truncate(labels[i], 140) }),
      el("div", { class: "meta", text: str(n.kind) + (n.status ? " · " + n.status : "") + (n.path && n.kind === "claim" ? " · " + n.path : "") }));
    tooltip.hidden = false;
    tooltip.style.left = Math.min(x + 14, W - 300) + "px";
    tooltip.style.top = Math.min(y + 14, H - 60) + "px";
  });
  const endDrag = (ev) => {
    if (!drag) return;
    const wasClick = !drag.moved;
    drag = null;
    canvas.classList.remove("dragging");
    if (ev.type === "pointerup" && wasClick) {
      const [x, y] = local(ev);
      select(hitTest(x, y));
    }
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointercancel", endDrag);
  canvas.addEventListener("pointerleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const [x, y] = local(ev);
    zoomAt(x, y, Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.0015)));
  }, { passive: false });
  canvas.addEventListener("keydown", (ev) => {
    const step = 80 / cam.k;
    const keys = {
      ArrowLeft: () => { cam.x -= step; }, ArrowRight: () => { cam.x += step; },
      ArrowUp: () => { cam.y -= step; }, ArrowDown: () => { cam.y += step; },
      "+": () => zoomAt(W / 2, H / 2, 1.3), "=": () => zoomAt(W / 2, H / 2, 1.3),
      "-": () => zoomAt(W / 2, H / 2, 1 / 1.3), 0: () => fit(), Escape: () => select(-1),
    };
    const action = keys[ev.key];
    if (!action) return;
    ev.preventDefault();
    action();
    userMoved = true;
    requestDraw();
  });
  $("rt-fit").addEventListener("click", () => fit());
  $("rt-zoom-in").addEventListener("click", () => zoomAt(W / 2, H / 2, 1.4));
  $("rt-zoom-out").addEventListener("click", () => zoomAt(W / 2, H / 2, 1 / 1.4));
  let searchTimer = 0;
  searchInput.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => runSearch(searchInput.value), N > 5000 ? 150 : 40);
  });
  searchInput.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { ev.preventDefault(); clearTimeout(searchTimer); runSearch(searchInput.value); searchResults(); }
    else if (ev.key === "Escape") { searchInput.value = ""; runSearch(""); }
  });

  // ------------------------------------------------------------------ layout driver
  function runLayout() {
    const start = performance.now();
    let it = 0, lastPreview = 0;
    const budget = 14;
    const frame = () => {
      const t0 = performance.now();
      do {
        layoutStep(SPACING * 2 * (1 - it / ITERATIONS) + SPACING * 0.05);
        it++;
      } while (it < ITERATIONS && performance.now() - t0 < budget);
      stats.computeMs += performance.now() - t0;
      stats.iterations = it;
      hitGridDirty = true; // nodes moved
      if (it < ITERATIONS) {
        // Previews of the settling layout, a few per second (none with reduced motion).
        if (!reduceMotion() && performance.now() - lastPreview > 150) {
          if (!userMoved) fit(true);
          draw();
          stats.previews++;
          lastPreview = performance.now();
        } else updateStats();
        requestAnimationFrame(frame);
        return;
      }
      stats.layoutMs = performance.now() - start;
      ready = true;
      buildHitGrid();
      if (!userMoved) fit(true);
      draw();
      canvas.dataset.layoutMs = stats.layoutMs.toFixed(1);
      canvas.dataset.computeMs = stats.computeMs.toFixed(1);
      canvas.dataset.iterations = String(it);
      canvas.dataset.ready = "true";
    };
    requestAnimationFrame(frame);
  }

  // ------------------------------------------------------------------ start
  header();
  renderLenses();
  renderNotices();
  computeVisibility();
  renderLegend();
  overview();
  window.raytsystemUniverse = Object.freeze({
    get ready() { return ready; },
    stats: () => ({
      ...stats, nodes: N, edges: E, sampledOut, lens, reducedMotion: reduceMotion(),
      visible: vis.reduce((a, b) => a + b, 0),
    }),
    /** Where node `id` is drawn, in viewport CSS pixels, or null when it is not drawn. */
    nodeScreenPosition(id) {
      const i = index.get(str(id));
      if (i === undefined || !vis[i] || listMode) return null;
      const { k, ox, oy } = transform();
      const sx = X[i] * k + ox, sy = Y[i] * k + oy;
      if (sx < 0 || sy < 0 || sx > W || sy > H) return null;
      const rect = canvas.getBoundingClientRect();
      return { x: rect.left + sx, y: rect.top + sy };
    },
    centerOn(id) { const i = index.get(str(id)); if (i !== undefined) { centerOn(i); draw(); } },
    select(id) { const i = index.get(str(id)); select(i === undefined ? -1 : i); },
    setLens,
    /** Draw now and wait for the pixels (a 1-pixel read flushes the canvas): milliseconds. */
    measureDraw() {
      const t0 = performance.now();
      draw();
      ctx.getImageData(0, 0, 1, 1);
      return performance.now() - t0;
    },
  });
  if (!ctx || !N) {
    if (!N) {
      canvas.hidden = true;
      $("rt-legend").hidden = true;
      stage.append(el("p", { class: "empty", text: "This generation has no nodes." }));
    }
    ready = true;
    canvas.dataset.drawnNodes = "0";
    canvas.dataset.ready = "true";
    if (!ctx && N) setListMode(true);
    return;
  }
  initialLayout();
  edgeWeights();
  resize();
  if (typeof ResizeObserver === "function") new ResizeObserver(() => { if (!listMode) resize(); }).observe(stage);
  else window.addEventListener("resize", resize);
  fit(true);
  if (!reduceMotion()) draw();
  runLayout();
})();
