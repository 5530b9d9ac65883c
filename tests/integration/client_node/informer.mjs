// An informer (makeInformer: list, then watch from the list's resourceVersion) over Pods, one
// existing before it starts: its add/update/delete events and its cache. argv: the kubeconfig.
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const ns = 'default';
const say = (o) => console.log(JSON.stringify(o));
const pod = (name) => ({ metadata: { name }, spec: { containers: [{ name: 'c', image: 'nginx' }] } });
const until = async (done) => {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 50));
};

await core.createNamespacedPod({ namespace: ns, body: pod('before') });
const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${ns}/pods`,
  () => core.listNamespacedPod({ namespace: ns }));
const events = [];
for (const verb of ['add', 'update', 'delete']) {
  informer.on(verb, (obj) => events.push([verb, obj.metadata.name]));
}
let stopping = false;
informer.on('error', (err) => { if (!stopping) say({ error: String(err) }); });
await informer.start();
await until(() => events.length >= 1);
await core.createNamespacedPod({ namespace: ns, body: pod('after') });
await core.patchNamespacedPod(
  { name: 'after', namespace: ns, body: { metadata: { labels: { seen: 'yes' } } } },
  k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
await core.deleteNamespacedPod({ name: 'before', namespace: ns, gracePeriodSeconds: 0 });
await until(() => events.some(([verb, name]) => verb === 'delete' && name === 'before'));
const cached = informer.list().map((p) => [p.metadata.name, p.metadata.labels ?? {}]);
say({ events, cached });
stopping = true;
await informer.stop();
