// CustomObjectsApi and Watch on a custom resource (a CRD installed before): create, get, the
// CRD's default and CEL rule as the server applies them, and the watch's events. argv: the
// kubeconfig.
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const say = (o) => console.log(JSON.stringify(o));
const where = { group: 'tests.kubewire.io', version: 'v1', namespace: 'default', plural: 'gizmos' };

const seen = [];
const watch = new k8s.Watch(kc);
const request = await watch.watch('/apis/tests.kubewire.io/v1/namespaces/default/gizmos', {},
  (type, obj) => seen.push([type, obj.metadata.name, obj.spec?.size ?? null]), () => {});
const created = await custom.createNamespacedCustomObject({
  ...where, body: { apiVersion: 'tests.kubewire.io/v1', kind: 'Gizmo',
    metadata: { name: 'g1' }, spec: { size: 3 } } });
say({ created: created.metadata.name, shape: created.spec.shape });
const got = await custom.getNamespacedCustomObject({ ...where, name: 'g1' });
say({ got: got.spec });
try {
  await custom.createNamespacedCustomObject({
    ...where, body: { apiVersion: 'tests.kubewire.io/v1', kind: 'Gizmo',
      metadata: { name: 'huge' }, spec: { size: 1000 } } });
  say({ refused: false });
} catch (e) {
  const status = JSON.parse(e.body);
  say({ refused: e.code, reason: status.reason, causes: status.details.causes.map((c) => c.message) });
}
await custom.deleteNamespacedCustomObject({ ...where, name: 'g1' });
for (let i = 0; i < 200 && !seen.some(([type]) => type === 'DELETED'); i++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
say({ seen });
request.abort();
process.exit(0);
