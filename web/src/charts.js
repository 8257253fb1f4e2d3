// The cost and evaluation charts (uPlot: drag to zoom, double-click to reset, hover for values),
// shared by the job console (console.js) and the platform's job page (platform/job.js). Plain
// browser JavaScript: defines the global TesseraCharts.
"use strict";

const TesseraCharts = (() => {
  const PALETTE = ["#2f6fde", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#4b5563"];

  function chartWidth(el) {
    return Math.max(320, el.clientWidth - 8);
  }

  // costByTrainer: trainer -> [[step...], [cost...]]. The x values are every step any trainer
  // reported; the average is the mean of each trainer's latest cost at or before the step.
  function costData(costByTrainer) {
    const trainers = Object.keys(costByTrainer).sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    const steps = new Set();
    for (const t of trainers) for (const s of costByTrainer[t][0]) steps.add(s);
    const xs = [...steps].sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const series = trainers.map((t) => {
      const ys = new Array(xs.length).fill(null);
      const [st, cs] = costByTrainer[t];
      for (let i = 0; i < st.length; i++) ys[index.get(st[i])] = cs[i];
      return ys;
    });
    const last = new Array(trainers.length).fill(null);
    const avg = xs.map((_, i) => {
      let sum = 0, n = 0;
      series.forEach((ys, k) => {
        if (ys[i] !== null) last[k] = ys[i];
        if (last[k] !== null) { sum += last[k]; n++; }
      });
      return n ? sum / n : null;
    });
    return { trainers, data: [xs, avg, ...series] };
  }

  // Draws (or updates) the cost chart in `el`; returns the plot to pass back next time.
  function drawCost(el, plot, costByTrainer) {
    const { trainers, data } = costData(costByTrainer);
    el.dataset.points = String(data[0].length);
    if (data[0].length === 0) return plot;
    const wanted = 1 + trainers.length;
    if (!plot || plot.series.length - 1 !== wanted) {
      if (plot) plot.destroy();
      const series = [{ label: "step" }, { label: "average", stroke: "#111827", width: 2, spanGaps: true }];
      trainers.forEach((t, i) => series.push({ label: `trainer ${t}`, stroke: PALETTE[i % PALETTE.length], width: 1,
                                                spanGaps: true }));
      return new uPlot({ width: chartWidth(el), height: 260, series, scales: { x: { time: false } },
                         axes: [{ label: "step" }, { label: "cost per sample" }] }, data, el);
    }
    plot.setData(data);
    return plot;
  }

  // evalByMetric: metric -> {pass: value}. Each metric on its own scale and axis (accuracy in
  // 0..1 beside a loss of 2 would be flat).
  function drawEval(el, plot, evalByMetric) {
    const metrics = Object.keys(evalByMetric).sort();
    const passes = new Set();
    for (const m of metrics) for (const p of Object.keys(evalByMetric[m])) passes.add(Number(p));
    const xs = [...passes].sort((a, b) => a - b);
    el.dataset.points = String(xs.length);
    el.dataset.axes = String(metrics.length);
    if (xs.length === 0) return plot;
    const data = [xs, ...metrics.map((m) => xs.map((p) => evalByMetric[m][p] ?? null))];
    if (!plot || plot.series.length - 1 !== metrics.length) {
      if (plot) plot.destroy();
      const series = [{ label: "pass" }];
      const axes = [{ label: "pass", incrs: [1, 2, 5, 10, 20, 50, 100] }];
      const scales = { x: { time: false } };
      metrics.forEach((m, i) => {
        const color = PALETTE[i % PALETTE.length];
        series.push({ label: m, scale: m, stroke: color, width: 2, points: { show: true } });
        scales[m] = { auto: true };
        axes.push({ scale: m, label: m, side: i === 0 ? 3 : 1, stroke: color, grid: { show: i === 0 } });
      });
      return new uPlot({ width: chartWidth(el), height: 260, series, scales, axes }, data, el);
    }
    plot.setData(data);
    return plot;
  }

  // Adds history points (cost: {trainer, step, cost}; evaluation: {metric, pass, value}) to the
  // two maps the charts draw.
  function addPoints(points, costByTrainer, evalByMetric) {
    for (const p of points) {
      if (p.metric) {
        (evalByMetric[p.metric] ??= {})[p.pass] = p.value;
      } else if (p.cost !== undefined) {
        const s = (costByTrainer[p.trainer] ??= [[], []]);
        s[0].push(p.step);
        s[1].push(p.cost);
      }
    }
  }

  return { PALETTE, chartWidth, costData, drawCost, drawEval, addPoints };
})();
