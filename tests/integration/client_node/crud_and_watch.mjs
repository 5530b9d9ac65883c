// CoreV1Api and Watch as a client-node user writes them: create, list with a label selector,
// merge patch, a read that fails, delete, while a watch with bookmarks looks on. One JSON line
// per step on stdout. argv: the kubeconfig.
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const ns = 'default';
const say = (o) => console.log(JSON.stringify(o));
const pod = (name) => ({
  metadata: { name, labels: { app: 'web' } },
  spec: { containers: [{ name: 'c', image: 'nginx' }] },
});

const seen = [];
let opened;
const open = new Promise((resolve) => { opened = resolve; });
const watch = new k8s.Watch(kc);
const request = await watch.watch(`/api/v1/namespaces/${ns}/pods`, { allowWatchBookmarks: true },
  (type, obj) => {
    seen.push([type, obj.metadata?.name ?? null, obj.metadata?.resourceVersion ?? null,
      obj.metadata?.annotations?.['k8s.io/initial-events-end'] ?? null]);
    opened();
  },
  (err) => say({ watchEnded: err ? String(err.name) : null }));
await open; // the initial-events-end bookmark: the watch is live

const created = await core.createNamespacedPod({ namespace: ns, body: pod('p1') });
say({ created: created.metadata.name, uid: Boolean(created.metadata.uid) });
const listed = await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=web' });
say({ listed: listed.items.map((p) => p.metadata.name), kind: listed.kind ?? null });
const patched = await core.patchNamespacedPod(
  { name: 'p1', namespace: ns, body: { metadata: { annotations: { a: 'b' } } } },
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
say({ patched: patched.metadata.annotations });
try {
  await core.readNamespacedPod({ name: 'nope', namespace: ns });
  say({ missing: 'found' });
} catch (e) {
  const status = JSON.parse(e.body);
  say({ missing: e.code, reason: status.reason, message: status.message });
}
await core.deleteNamespacedPod({ name: 'p1', namespace: ns });
for (let i = 0; i < 200 && !seen.some(([type]) => type === 'DELETED'); i++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
say({ seen });
request.abort();
process.exit(0);
