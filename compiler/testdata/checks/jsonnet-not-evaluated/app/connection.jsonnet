local org = 'acme';
{
  apiVersion: 'omnia.altairalabs.ai/v1alpha1',
  kind: 'Connection',
  metadata: { name: 'github-' + org },
  spec: {
    hosts: ['api.github.com'],
    credential: { kind: 'secret', secretRef: { name: 'github-token' } },
  },
}
