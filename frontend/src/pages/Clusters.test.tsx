import { screen } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { PROJECT, json, renderPage, scope, stubApi } from '../test/render'
import { ClusterDetailPage, memberIndex } from './ClusterDetail'
import { ClustersPage, clusterBody } from './Clusters'

const CLUSTER = {
  id: '0190a3b4-0000-7000-8000-0000000000e1', project: PROJECT.id, name: 'train', flavor: 'f1', image: 'i1', size: 2,
  status: 'active', error_code: '', error_reason: '', members: ['vm1', 'vm2'], created_at: '2026-12-01T00:00:00Z',
}
const VM = (id: string, status: string) => ({ id, name: `train-${id}`, status, ports: [{ fixed_ips: ['10.0.0.5'] }] })
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const LONG = { timeout: 5000 }

describe('clusters', () => {
  it('sends the required fields, and the subnet and keys only when chosen', () => {
    const form = { name: 'train', flavor: 'f1', image: 'i1', size: 4, subnet: null, sshKeys: [] }
    expect(clusterBody(form, 'p')).toEqual({ project: 'p', name: 'train', flavor: 'f1', image: 'i1', size: 4, user_data: '', queue: false, sla_tier: '' })
    expect(clusterBody({ ...form, subnet: 's1', sshKeys: ['k1'] }, 'p'))
      .toMatchObject({ subnet_id: 's1', ssh_keys: ['k1'] })
  })

  it('lists the project’s clusters and disables create for a viewer', async () => {
    stubApi({
      'GET /api/v1/clusters/': () => json(page([CLUSTER])),
      'GET /api/v1/flavors/': () => json(page([])),
      'GET /api/v1/images/': () => json(page([])),
      'GET /api/v1/ssh-keys/': () => json(page([])),
      'GET /api/v1/subnets/': () => json(page([])),
    })
    renderPage(<ClustersPage />, { value: scope({ canWrite: false }) })
    expect(await screen.findByRole('link', { name: 'train' }, LONG)).toHaveAttribute('href', `/clusters/${CLUSTER.id}`)
    expect(screen.getByRole('button', { name: 'Create cluster' })).toBeDisabled()
  })

  it('shows a cluster’s member instances with their states', async () => {
    stubApi({
      [`GET /api/v1/clusters/${CLUSTER.id}/`]: () => json(CLUSTER),
      'GET /api/v1/instances/': (r) => json(page(new URL(r.url).searchParams.get('cluster') === CLUSTER.id ? [VM('vm1', 'active'), VM('vm2', 'provisioning')] : [])),
      'GET /api/v1/flavors/': () => json(page([])),
      'GET /api/v1/images/': () => json(page([])),
    })
    renderPage(<ClusterDetailPage />, { path: `/clusters/${CLUSTER.id}`, route: '/clusters/:id' })
    expect(await screen.findByRole('heading', { name: 'train' }, LONG)).toBeInTheDocument()
    const rows = await screen.findAllByTestId('member', {}, LONG)
    expect(rows.map((r) => r.textContent)).toEqual(['train-vm1active10.0.0.5', 'train-vm2provisioning10.0.0.5'])
    expect(screen.getByRole('button', { name: 'Delete cluster' })).toBeEnabled()
  })

  it('lists the members by their index in the cluster (node 0, 1, 2 … 10), whatever order the API answers', async () => {
    const member = (i: number) => ({ ...VM(`vm${i}`, 'active'), name: `train-${i}`, ports: [] })
    stubApi({
      [`GET /api/v1/clusters/${CLUSTER.id}/`]: () => json({ ...CLUSTER, size: 12 }),
      'GET /api/v1/instances/': () => json(page([10, 2, 0, 11, 1, 3, 9, 4, 8, 5, 7, 6].map(member))),
      'GET /api/v1/flavors/': () => json(page([])),
      'GET /api/v1/images/': () => json(page([])),
    })
    renderPage(<ClusterDetailPage />, { path: `/clusters/${CLUSTER.id}`, route: '/clusters/:id' })
    const rows = await screen.findAllByTestId('member', {}, LONG)
    expect(rows.map((r) => r.querySelector('a')?.textContent)).toEqual(Array.from({ length: 12 }, (_, i) => `train-${i}`))
    expect(memberIndex('train', 'train-10')).toBe(10)
    expect(memberIndex('train', 'train-a-1')).toBeNull()
    expect(memberIndex('train-a', 'train-a-1')).toBe(1)
  })

  it('answers "Not found" for another tenant’s cluster', async () => {
    stubApi({})
    renderPage(<ClusterDetailPage />, { path: `/clusters/${CLUSTER.id}`, route: '/clusters/:id' })
    expect(await screen.findByRole('heading', { name: 'Not found' }, LONG)).toBeInTheDocument()
  })
})
