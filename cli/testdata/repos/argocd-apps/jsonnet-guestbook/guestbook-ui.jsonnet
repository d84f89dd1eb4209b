local params = import 'params.libsonnet';
[{ apiVersion: 'v1', kind: 'Service', metadata: { name: params.name } }]
