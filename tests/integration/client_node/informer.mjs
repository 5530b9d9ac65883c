// An informer (makeInformer: list, then watch from the list's resourceVersion) over Pods, one
// created before it starts. argv: the kubeconfig, then the scenario:
// - "changes": a Pod created, patched, and the first deleted; its events and cache.
// - "relist": it prints "synced" once it holds the first Pod; the test then holds its stream,
//   creates "missed", expires the history and ends the stream, so the informer's resume from its
//   last resourceVersion gets 410 Gone; its events and cache once it has "missed" (or 20 s).
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const scenario = process.argv[3];
const core = kc.makeApiClient(k8s.CoreV1Api);
const ns = 'default';
const say = (o) => console.log(JSON.stringify(o));
const pod = (name) => ({ metadata: { name }, spec: { containers: [{ name: 'c', image: 'nginx' }] } });
const until = async (done) => {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((r) => setTimeout(r, 50));
};

await core.createNamespacedPod({ namespace: ns, body: pod('before') });
const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${ns}/pods`,
  () => core.listNamespacedPod({ namespace: ns }));
const events = [];
for (const verb of ['add', 'update', 'delete']) {
  informer.on(verb, (obj) => events.push([verb, obj.metadata.name]));
}
let stopping = false;
const errors = [];
informer.on('error', (err) => { if (!stopping) errors.push(String(err)); });
await informer.start();
await until(() => events.length >= 1);
if (scenario === 'relist') {
  say({ synced: events });
  await until(() => informer.list().some((p) => p.metadata.name === 'missed'));
} else {
  await core.createNamespacedPod({ namespace: ns, body: pod('after') });
  await core.patchNamespacedPod(
    { name: 'after', namespace: ns, body: { metadata: { labels: { seen: 'yes' } } } },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
  await core.deleteNamespacedPod({ name: 'before', namespace: ns, gracePeriodSeconds: 0 });
  await until(() => events.some(([verb, name]) => verb === 'delete' && name === 'before'));
}
const cached = informer.list().map((p) => [p.metadata.name, p.metadata.labels ?? {}]);
say({ events, errors, cached });
stopping = true;
await informer.stop();
process.exit(0); // an informer may still hold a watch it restarted as it stopped
