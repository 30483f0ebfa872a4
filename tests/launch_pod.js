#!/usr/bin/env node
// Turns one container of a rendered Kubernetes workload into the exact process the kubelet would
// start, for tests/launch_manifests_test.sh: the container's command and args with Kubernetes'
// $(VAR) expansion, and its environment (envFrom ConfigMaps and Secrets of the same rendering,
// env values, and downward-API fields filled from the pod facts given).
//
//   node launch_pod.js RENDERED.yaml KIND NAME --pod_name P --pod_ip IP [--container C]
//       [--map FROM=TO ...] [--secrets DIR]
//   node launch_pod.js RENDERED.yaml KIND NAME --info    prints "NAMESPACE REPLICAS"
//   node launch_pod.js RENDERED.yaml KIND NAME --probe readinessProbe|livenessProbe
//       prints the gRPC probe's "PORT SERVICE" (a named port resolved to its number)
//   node launch_pod.js RENDERED.yaml KIND NAME --mounts
//       prints "MOUNT_PATH VOLUME SOURCE" per volumeMount of the first container (SOURCE:
//       secret/NAME, configMap/NAME, persistentVolumeClaim/NAME, or the volume's kind)
//   node launch_pod.js RENDERED.yaml KIND NAME --args
//       prints the first container's command and args as written (no expansion), one per line
//   node launch_pod.js RENDERED.yaml KIND NAME --get DOTTED.PATH
//       prints the value at that path of the object (e.g. spec.backoffLimit) as JSON, or
//       "undefined" when there is none
//
// --map rewrites paths the image or the pod has (binaries, volume mounts) to where this machine
// has them. --secrets DIR plays the kubelet for Secret volumes: each one the container mounts is
// written from the Secret object of the same rendering (its keys, or its `items`, with the
// volume's defaultMode) to DIR/<volume>/ and its mount path mapped there; a Secret missing from the
// rendering, or a key missing from the Secret, is an error. Every other volumeMount of the
// container must be mapped. Writes NUL-separated tokens: the environment as NAME=VALUE, then "--",
// then argv. Errors go to stderr, exit code 1.
"use strict";

const fs = require("fs");
const path = require("path");
// The validator's pinned YAML parser (installed by tools/setup.sh).
const YAML = require(path.join(__dirname, "..", "third_party", "k8s_validate", "node_modules",
  "yaml"));

function fail(message) {
  process.stderr.write(`launch_pod.js: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  if (argv.length < 3) fail("usage: launch_pod.js RENDERED.yaml KIND NAME --pod_name P --pod_ip IP ...");
  const o = { file: argv[0], kind: argv[1], name: argv[2], maps: [], container: "" };
  if (argv[3] === "--info") {
    o.info = true;
    return o;
  }
  if (argv[3] === "--probe") {
    o.probe = argv[4];
    return o;
  }
  if (argv[3] === "--mounts") {
    o.mounts = true;
    return o;
  }
  if (argv[3] === "--args") {
    o.args = true;
    return o;
  }
  if (argv[3] === "--get") {
    if (!argv[4]) fail("--get needs a dotted path, e.g. spec.backoffLimit");
    o.get = argv[4];
    return o;
  }
  for (let i = 3; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) fail(`${flag} needs a value`);
    if (flag === "--pod_name") o.podName = value;
    else if (flag === "--pod_ip") o.podIp = value;
    else if (flag === "--container") o.container = value;
    else if (flag === "--secrets") o.secrets = value;
    else if (flag === "--map") {
      const eq = value.indexOf("=");
      if (eq <= 0) fail(`--map ${value}: expected FROM=TO`);
      o.maps.push([value.slice(0, eq), value.slice(eq + 1)]);
    } else fail(`unknown flag ${flag}`);
  }
  if (!o.podName || !o.podIp) fail("--pod_name and --pod_ip are required");
  return o;
}

// Kubernetes' expansion: $(NAME) -> value when NAME is defined, left as is otherwise; $$ -> $.
function expand(text, env) {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name) => {
    if (m === "$$") return "$";
    return Object.prototype.hasOwnProperty.call(env, name) ? env[name] : m;
  });
}

function main() {
  const o = parseArgs(process.argv.slice(2));
  const objects = YAML.parseAllDocuments(fs.readFileSync(o.file, "utf8"))
    .map((d) => d.toJS()).filter((x) => x);
  const find = (kind, name) => objects.find((x) => x.kind === kind && x.metadata.name === name);
  const workload = find(o.kind, o.name);
  if (!workload) fail(`no ${o.kind}/${o.name} in ${o.file}`);
  const namespace = workload.metadata.namespace || "default";
  if (o.get) {
    let v = workload;
    for (const key of o.get.split(".")) v = v === undefined || v === null ? undefined : v[key];
    process.stdout.write(`${v === undefined ? "undefined" : JSON.stringify(v)}\n`);
    return;
  }
  if (o.probe) {
    const c0 = workload.spec.template.spec.containers[0];
    const probe = c0[o.probe];
    if (!probe || !probe.grpc) fail(`${o.kind}/${o.name} has no gRPC ${o.probe}`);
    let port = probe.grpc.port;
    if (typeof port === "string") {
      const named = (c0.ports || []).find((p) => p.name === port);
      if (!named) fail(`${o.probe}: no container port named ${port}`);
      port = named.containerPort;
    }
    process.stdout.write(`${port} ${probe.grpc.service || ""}\n`);
    return;
  }
  if (o.info) {
    process.stdout.write(`${namespace} ${workload.spec.replicas === undefined ? 1 : workload.spec.replicas}\n`);
    return;
  }
  const template = workload.spec.template;
  const containers = template.spec.containers;
  const c = o.container ? containers.find((x) => x.name === o.container) : containers[0];
  if (!c) fail(`${o.kind}/${o.name} has no container ${o.container}`);
  const volumeOf = (m) => {
    const v = (template.spec.volumes || []).find((x) => x.name === m.name);
    if (!v) fail(`volumeMount ${m.mountPath}: no volume named ${m.name} in the pod`);
    return v;
  };
  if (o.args) {
    for (const a of (c.command || []).concat(c.args || [])) process.stdout.write(`${a}\n`);
    return;
  }
  if (o.mounts) {
    for (const m of c.volumeMounts || []) {
      const v = volumeOf(m);
      const source = v.secret ? `secret/${v.secret.secretName}`
        : v.configMap ? `configMap/${v.configMap.name}`
          : v.persistentVolumeClaim ? `persistentVolumeClaim/${v.persistentVolumeClaim.claimName}`
          : Object.keys(v).filter((k) => k !== "name").join(",");
      process.stdout.write(`${m.mountPath} ${m.name} ${source}\n`);
    }
    return;
  }
  if (!Array.isArray(c.command) || c.command.length === 0) {
    fail(`${o.kind}/${o.name}: container ${c.name} sets no command (the image's entrypoint is not modelled)`);
  }
  const labels = Object.assign({}, template.metadata && template.metadata.labels);
  const fields = {
    "metadata.name": o.podName,
    "metadata.namespace": namespace,
    "status.podIP": o.podIp,
    "status.podIPs": o.podIp,
    "spec.nodeName": "node-0",
    "spec.serviceAccountName": template.spec.serviceAccountName || "default",
  };
  const dataOf = (kind, name, optional) => {
    const obj = find(kind, name);
    if (!obj) {
      if (optional) return {};
      fail(`${kind}/${name} is not in the rendering`);
    }
    const data = Object.assign({}, obj.data);
    if (kind === "Secret") for (const k of Object.keys(data)) data[k] = Buffer.from(data[k], "base64").toString();
    return Object.assign(data, obj.stringData);
  };

  // What the image sets, then what the pod sets, in the kubelet's order.
  const env = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOSTNAME: o.podName };
  for (const from of c.envFrom || []) {
    const ref = from.configMapRef || from.secretRef;
    const data = dataOf(from.configMapRef ? "ConfigMap" : "Secret", ref.name, ref.optional);
    for (const [k, v] of Object.entries(data)) env[(from.prefix || "") + k] = String(v);
  }
  for (const e of c.env || []) {
    if (e.value !== undefined) {
      env[e.name] = expand(String(e.value), env);
    } else if (e.valueFrom && e.valueFrom.fieldRef) {
      const p = e.valueFrom.fieldRef.fieldPath;
      const label = /^metadata\.labels\['(.+)'\]$/.exec(p);
      if (label) env[e.name] = labels[label[1]] || "";
      else if (Object.prototype.hasOwnProperty.call(fields, p)) env[e.name] = fields[p];
      else fail(`env ${e.name}: fieldRef ${p} is not modelled`);
    } else if (e.valueFrom && (e.valueFrom.configMapKeyRef || e.valueFrom.secretKeyRef)) {
      const ref = e.valueFrom.configMapKeyRef || e.valueFrom.secretKeyRef;
      const data = dataOf(e.valueFrom.configMapKeyRef ? "ConfigMap" : "Secret", ref.name, ref.optional);
      if (data[ref.key] === undefined && !ref.optional) fail(`env ${e.name}: no key ${ref.key} in ${ref.name}`);
      if (data[ref.key] !== undefined) env[e.name] = String(data[ref.key]);
    } else {
      fail(`env ${e.name}: this kind of value is not modelled`);
    }
  }

  if (o.secrets) {
    for (const m of c.volumeMounts || []) {
      const v = volumeOf(m);
      if (!v.secret) continue;
      if (m.subPath) fail(`volumeMount ${m.mountPath}: subPath is not modelled`);
      const secret = find("Secret", v.secret.secretName);
      if (!secret) {
        if (v.secret.optional) continue;
        fail(`the container mounts Secret ${v.secret.secretName} (volume ${m.name}) at ` +
          `${m.mountPath}, and the rendering has no such Secret`);
      }
      const data = dataOf("Secret", v.secret.secretName, false);
      const items = v.secret.items || Object.keys(data).map((k) => ({ key: k, path: k }));
      const dir = path.join(o.secrets, m.name);
      fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
      for (const item of items) {
        if (data[item.key] === undefined) {
          fail(`volume ${m.name}: Secret ${v.secret.secretName} has no key ${item.key}`);
        }
        const file = path.join(dir, item.path);
        fs.writeFileSync(file, data[item.key]);
        const mode = item.mode !== undefined ? item.mode : v.secret.defaultMode;
        fs.chmodSync(file, mode !== undefined ? mode : 0o644);
      }
      o.maps.unshift([m.mountPath, dir]);
    }
  }
  for (const m of c.volumeMounts || []) {
    if (!o.maps.some(([from]) => m.mountPath === from || m.mountPath.startsWith(from + "/"))) {
      fail(`the container mounts ${m.mountPath} (volume ${m.name}); map it with --map ${m.mountPath}=DIR`);
    }
  }
  const remap = (arg) => {
    for (const [from, to] of o.maps) {
      if (arg === from || arg.startsWith(from + "/")) return to + arg.slice(from.length);
      const at = arg.indexOf("=" + from);
      if (at >= 0 && (arg.length === at + 1 + from.length || arg[at + 1 + from.length] === "/")) {
        return arg.slice(0, at + 1) + to + arg.slice(at + 1 + from.length);
      }
    }
    return arg;
  };
  const argv = c.command.concat(c.args || []).map((a) => remap(expand(String(a), env)));
  const unresolved = argv.filter((a) => /\$\([A-Za-z_]/.test(a));
  if (unresolved.length > 0) fail(`unresolved references in ${unresolved.join(" ")}`);
  const tokens = Object.entries(env).map(([k, v]) => `${k}=${v}`).concat(["--"], argv);
  for (const t of tokens) if (t.includes("\0")) fail("a token holds a NUL byte");
  process.stdout.write(tokens.join("\0") + "\0");
}

main();
