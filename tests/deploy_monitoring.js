#!/usr/bin/env node
// Helpers of tests/deploy_monitoring_test.sh, on YAML and JSON it cannot read with grep:
//
//   node deploy_monitoring.js same-rules RULES.yml PROMETHEUSRULE.yaml
//       fails unless the PrometheusRule's spec.groups equal the rule file's groups
//   node deploy_monitoring.js rule-metrics RULES.yml
//       prints the meshrt_* metric names the rules' expressions read, one per line
//   node deploy_monitoring.js podmonitors MONITORING.yaml RENDERED.yaml
//       checks each PodMonitor against a rendered overlay: its selector selects the pods of
//       exactly one workload (and so of one role), whose container has the endpoint's port with
//       the number of its --metrics_port; its bearer token is the Secret and key the container
//       mounts for --metrics_token_file; its job label is the workload's name. Prints
//       "PODMONITOR KIND/NAME PORT" per endpoint
//   node deploy_monitoring.js discovery RENDERED.yaml NAMESPACE WORKERS ADDRESSES.json OUT.json
//       writes a file_sd file with the targets Prometheus' Kubernetes pod discovery (role: pod)
//       would find for the rendered pods: the Deployment's pod, WORKERS of the StatefulSet's and
//       the Job's, a target per container port (a container without ports: one without a port),
//       each with the __meta_kubernetes_* labels of that discovery. ADDRESSES maps
//       "POD/PORT_NAME" to the address of the process that plays it; ports not in it get an
//       address where nothing listens (127.0.0.2:PORT)
//   node deploy_monitoring.js scrape-config README.md NAMESPACE TOKEN SD.json OUT.yml
//       the Prometheus configuration deploy/README.md shows (the ```yaml block after the marker
//       "<!-- prometheus-scrape-config"), with only what a machine without Kubernetes needs
//       changed: each job's kubernetes_sd_configs (which must be role: pod in NAMESPACE) becomes
//       file_sd_configs of SD.json, its credentials_file (which must be the path the README tells
//       to mount) TOKEN, and a global scrape and evaluation interval of 1 s is set
//   node deploy_monitoring.js summary targets|rules|alerts|query < ANSWER.json
//       one sorted line per item of a Prometheus HTTP API answer: targets "JOB POD HEALTH ERROR"
//       (active targets), rules "NAME HEALTH evaluated|never", alerts "NAME STATE JOB POD", query
//       "JOB NAMESPACE POD VALUE" (an instant vector)
//
// Errors go to stderr, exit code 1.
"use strict";

const fs = require("fs");
const path = require("path");
const util = require("util");
// The validator's pinned YAML parser (installed by tools/setup.sh).
const YAML = require(path.join(__dirname, "..", "third_party", "k8s_validate", "node_modules",
  "yaml"));

function fail(message) {
  process.stderr.write(`deploy_monitoring.js: ${message}\n`);
  process.exit(1);
}

function readAll(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => {
    if (d.errors.length > 0) fail(`${file}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((o) => o !== null && typeof o === "object");
}

function readOne(file) {
  const objects = readAll(file);
  if (objects.length !== 1) fail(`${file}: expected one YAML document, found ${objects.length}`);
  return objects[0];
}

function sameRules(rulesFile, crFile) {
  const rules = readOne(rulesFile);
  const cr = readAll(crFile).find((o) => o.kind === "PrometheusRule");
  if (cr === undefined) fail(`${crFile}: no PrometheusRule`);
  if (!util.isDeepStrictEqual(rules.groups, (cr.spec || {}).groups)) {
    fail(`${crFile}'s spec.groups differ from ${rulesFile}'s groups: copy the groups over`);
  }
}

function ruleMetrics(rulesFile) {
  const names = new Set();
  for (const group of readOne(rulesFile).groups || []) {
    for (const rule of group.rules || []) {
      for (const m of String(rule.expr).matchAll(/\bmeshrt_[a-z0-9_]+/g)) names.add(m[0]);
    }
  }
  if (names.size === 0) fail(`${rulesFile}: no meshrt_* metric in any rule`);
  process.stdout.write([...names].sort().map((n) => `${n}\n`).join(""));
}

// Whether a label selector (matchLabels, matchExpressions) selects `labels`.
function selects(selector, labels) {
  const l = labels || {};
  for (const [k, v] of Object.entries(selector.matchLabels || {})) if (l[k] !== v) return false;
  for (const e of selector.matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(l, e.key);
    const inValues = has && (e.values || []).includes(l[e.key]);
    if (e.operator === "In" && !inValues) return false;
    if (e.operator === "NotIn" && inValues) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return Object.keys(selector.matchLabels || {}).length + (selector.matchExpressions || []).length > 0;
}

function workloads(rendered) {
  return readAll(rendered).filter((o) => o.spec && o.spec.template && o.spec.template.spec);
}

// The value of `--FLAG=VALUE` in a container's args, or undefined.
function flag(container, name) {
  const arg = (container.args || []).find((a) => String(a).startsWith(`--${name}=`));
  return arg === undefined ? undefined : String(arg).slice(name.length + 3);
}

function podMonitors(monitoringFile, rendered) {
  const monitors = readAll(monitoringFile).filter((o) => o.kind === "PodMonitor");
  if (monitors.length === 0) fail(`${monitoringFile}: no PodMonitor`);
  const all = workloads(rendered);
  const roles = new Set();
  for (const m of monitors) {
    const name = m.metadata.name;
    const hits = all.filter((w) => selects(m.spec.selector || {}, w.spec.template.metadata.labels));
    if (hits.length !== 1) {
      fail(`PodMonitor ${name} selects the pods of ${hits.length} workloads ` +
        `(${hits.map((w) => `${w.kind}/${w.metadata.name}`).join(", ") || "none"}), not one`);
    }
    const w = hits[0];
    const where = `PodMonitor ${name} (${w.kind}/${w.metadata.name})`;
    if (roles.has(w.metadata.name)) fail(`${where}: a second PodMonitor for the same pods`);
    roles.add(w.metadata.name);
    const pod = w.spec.template.spec;
    for (const ep of m.spec.podMetricsEndpoints || []) {
      const container = pod.containers.find((c) => (c.ports || []).some((p) => p.name === ep.port));
      if (container === undefined) fail(`${where}: no container has a port named "${ep.port}"`);
      const port = container.ports.find((p) => p.name === ep.port);
      if (String(port.containerPort) !== flag(container, "metrics_port")) {
        fail(`${where}: port ${ep.port} is ${port.containerPort}, but the daemon serves metrics on ` +
          `--metrics_port=${flag(container, "metrics_port")}`);
      }
      if ((ep.path || "/metrics") !== "/metrics") fail(`${where}: path ${ep.path}, not /metrics`);
      const tokenFile = flag(container, "metrics_token_file");
      if (tokenFile === undefined) fail(`${where}: the container has no --metrics_token_file`);
      const mount = (container.volumeMounts || []).find((v) => v.mountPath === path.dirname(tokenFile));
      const volume = mount && (pod.volumes || []).find((v) => v.name === mount.name);
      if (!volume || !volume.secret) fail(`${where}: ${tokenFile} is on no Secret volume`);
      const cred = ((ep.authorization || {}).credentials) || {};
      if ((ep.authorization || {}).type !== "Bearer" || cred.name !== volume.secret.secretName ||
          cred.key !== path.basename(tokenFile)) {
        fail(`${where}: the bearer token must be Secret ${volume.secret.secretName} key ` +
          `${path.basename(tokenFile)} (the daemon's --metrics_token_file), not ` +
          `${JSON.stringify(ep.authorization)}`);
      }
      const job = (ep.relabelings || []).find((r) => r.targetLabel === "job");
      if (!job || job.replacement !== w.metadata.name) {
        fail(`${where}: its job label must be ${w.metadata.name} (the alert rules' job names)`);
      }
      process.stdout.write(`${name} ${w.kind}/${w.metadata.name} ${ep.port}\n`);
    }
  }
}

// A Kubernetes label or annotation name as Prometheus' discovery writes it into a label name.
const sanitize = (s) => s.replace(/[^a-zA-Z0-9_]/g, "_");

function discovery(rendered, namespace, workers, addressesFile, out) {
  const addresses = JSON.parse(fs.readFileSync(addressesFile, "utf8"));
  const used = new Set();
  const groups = [];
  let ip = 10;
  for (const w of workloads(rendered)) {
    if ((w.metadata.namespace || "") !== namespace) fail(`${w.kind}/${w.metadata.name} is not in ${namespace}`);
    let pods;
    if (w.kind === "StatefulSet") {
      pods = Array.from({ length: Number(workers) }, (_, i) => `${w.metadata.name}-${i}`);
    } else if (w.kind === "Deployment") {
      pods = [`${w.metadata.name}-5d8f9c7b6-x2x4q`];
    } else {
      pods = [`${w.metadata.name}-q7r2k`];
    }
    const template = w.spec.template;
    for (const pod of pods) {
      const podIp = `10.0.0.${ip++}`;
      const meta = {
        __meta_kubernetes_namespace: namespace,
        __meta_kubernetes_pod_name: pod,
        __meta_kubernetes_pod_ip: podIp,
        __meta_kubernetes_pod_ready: "true",
        __meta_kubernetes_pod_phase: "Running",
        __meta_kubernetes_pod_controller_kind: w.kind === "Deployment" ? "ReplicaSet" : w.kind,
        __meta_kubernetes_pod_controller_name: w.metadata.name,
      };
      const labels = { ...(template.metadata.labels || {}) };
      if (w.kind === "StatefulSet") labels["statefulset.kubernetes.io/pod-name"] = pod;
      for (const [k, v] of Object.entries(labels)) {
        meta[`__meta_kubernetes_pod_label_${sanitize(k)}`] = String(v);
        meta[`__meta_kubernetes_pod_labelpresent_${sanitize(k)}`] = "true";
      }
      for (const [k, v] of Object.entries(template.metadata.annotations || {})) {
        meta[`__meta_kubernetes_pod_annotation_${sanitize(k)}`] = String(v);
        meta[`__meta_kubernetes_pod_annotationpresent_${sanitize(k)}`] = "true";
      }
      for (const c of template.spec.containers) {
        const cmeta = {
          ...meta,
          __meta_kubernetes_pod_container_name: c.name,
          __meta_kubernetes_pod_container_image: c.image,
          __meta_kubernetes_pod_container_init: "false",
        };
        if (!c.ports || c.ports.length === 0) {
          groups.push({ targets: [`127.0.0.2`], labels: cmeta });
          continue;
        }
        for (const p of c.ports) {
          const key = `${pod}/${p.name}`;
          used.add(key);
          groups.push({
            targets: [addresses[key] || `127.0.0.2:${p.containerPort}`],
            labels: {
              ...cmeta,
              __meta_kubernetes_pod_container_port_name: p.name || "",
              __meta_kubernetes_pod_container_port_number: String(p.containerPort),
              __meta_kubernetes_pod_container_port_protocol: p.protocol || "TCP",
            },
          });
        }
      }
    }
  }
  for (const key of Object.keys(addresses)) {
    if (!used.has(key)) fail(`${addressesFile}: no rendered pod has the port ${key}`);
  }
  fs.writeFileSync(out, JSON.stringify(groups, null, 1));
}

const MOUNTED_TOKEN = "/etc/prometheus/meshrt/metrics.token";

function scrapeConfig(readme, namespace, token, sd, out) {
  const text = fs.readFileSync(readme, "utf8");
  const marker = text.indexOf("<!-- prometheus-scrape-config");
  if (marker < 0) fail(`${readme}: no "<!-- prometheus-scrape-config" marker`);
  const block = /```yaml\n([\s\S]*?)\n```/.exec(text.slice(marker));
  if (block === null) fail(`${readme}: no \`\`\`yaml block after the marker`);
  const config = YAML.parse(block[1]);
  const jobs = config.scrape_configs || [];
  if (jobs.length === 0) fail(`${readme}: the configuration has no scrape_configs`);
  for (const job of jobs) {
    const where = `${readme}: job ${job.job_name}`;
    const k8s = job.kubernetes_sd_configs || [];
    if (k8s.length !== 1 || k8s[0].role !== "pod" ||
        !((k8s[0].namespaces || {}).names || []).includes(namespace)) {
      fail(`${where}: expected one kubernetes_sd_config, role pod, in namespace ${namespace}: ` +
        JSON.stringify(k8s));
    }
    delete job.kubernetes_sd_configs;
    job.file_sd_configs = [{ files: [sd] }];
    const auth = job.authorization || {};
    if (auth.credentials_file !== MOUNTED_TOKEN) {
      fail(`${where}: credentials_file ${auth.credentials_file}, not ${MOUNTED_TOKEN} (where the README mounts the token)`);
    }
    auth.credentials_file = token;
  }
  config.global = { ...(config.global || {}), scrape_interval: "1s", scrape_timeout: "1s",
    evaluation_interval: "1s" };
  fs.writeFileSync(out, YAML.stringify(config));
}

function summary(what) {
  const data = JSON.parse(fs.readFileSync(0, "utf8")).data;
  const lines = {
    targets: () => data.activeTargets.map((t) =>
      `${t.labels.job} ${t.labels.pod} ${t.health} ${t.lastError}`),
    rules: () => data.groups.flatMap((g) => g.rules).map((r) =>
      `${r.name} ${r.health} ${r.lastEvaluation.startsWith("0001-") ? "never" : "evaluated"}`),
    alerts: () => data.alerts.map((a) =>
      `${a.labels.alertname} ${a.state} ${a.labels.job} ${a.labels.pod}`),
    query: () => data.result.map((r) =>
      `${r.metric.job} ${r.metric.namespace} ${r.metric.pod} ${r.value[1]}`),
  }[what];
  if (lines === undefined) fail(`summary of what? ${what}`);
  const out = lines().sort();
  process.stdout.write(out.map((l) => `${l}\n`).join(""));
}

const argv = process.argv.slice(2);
const commands = {
  "same-rules": [2, sameRules],
  "rule-metrics": [1, ruleMetrics],
  podmonitors: [2, podMonitors],
  discovery: [5, discovery],
  "scrape-config": [5, scrapeConfig],
  summary: [1, summary],
};
const command = commands[argv[0]];
if (command === undefined || argv.length !== command[0] + 1) {
  fail(`usage: deploy_monitoring.js ${Object.keys(commands).join("|")} ARGS... (see the header)`);
}
command[1](...argv.slice(1));
