// An informer that must list again: it prints "synced" once it holds the existing Pod; the test
// then holds its stream, creates a Pod, expires the history and ends the stream, so the
// informer's resume from its last resourceVersion gets 410 Gone. Its events and cache once it
// has the new Pod (or after 20 s). argv: the kubeconfig.
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const ns = 'default';
const say = (o) => console.log(JSON.stringify(o));
const until = async (done, ms = 20000) => {
  for (let i = 0; i < ms / 50 && !done(); i++) await new Promise((r) => setTimeout(r, 50));
};

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
say({ synced: events });
await until(() => informer.list().some((p) => p.metadata.name === 'missed'));
say({ events, errors, cached: informer.list().map((p) => p.metadata.name).sort() });
stopping = true;
await informer.stop();
