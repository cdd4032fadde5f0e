import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { PROJECT, json, renderPage, stubApi } from '../test/render'
import { InstancesPage } from './Instances'
import { IbPartitionsPanel } from './IbPartitions'
import { VpcsPanel } from './Networking'
import { tokenFilterQuery } from './Tokens'

const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const LONG = { timeout: 4000 }
const PART = { id: 'p1', project: PROJECT.id, fabric: 'ib-compute', name: 'train', pkey: 256, pkey_hex: '0x0100', ipoib: true, mtu: 2048, rate_gbps: null, sl: null, index0: false, members: [], created_at: '2026-12-01T00:00:00Z', updated_at: '' }

/** The query of the last GET of `path` seen. */
function lastQuery(seen: Request[], path: string): Record<string, string> {
  const url = new URL(seen.filter((r) => r.method === 'GET' && new URL(r.url).pathname === path).at(-1)!.url)
  const query: Record<string, string> = {}
  url.searchParams.forEach((value, key) => { query[key] = value })
  return query
}

/** The input the combobox labelled `label` types into. */
function combobox(label: string): HTMLElement {
  return screen.getAllByLabelText(label).find((el) => el.tagName === 'INPUT')!
}

describe('list filters send the API’s query parameters', () => {
  it('instances: a name search (name_contains) and a status; nothing matching offers to clear them', async () => {
    const seen = stubApi({
      'GET /api/v1/instances/': (request) => json(page(new URL(request.url).searchParams.has('name_contains') ? [] : [])),
      'GET /api/v1/flavors/': () => json(page([])),
    })
    renderPage(<InstancesPage />)
    expect(await screen.findByText('No instances yet')).toBeInTheDocument()
    fireEvent.change(screen.getByRole('searchbox', { name: 'Search by name' }), { target: { value: 'train' } })
    await waitFor(() => expect(lastQuery(seen, '/api/v1/instances/')).toMatchObject({ name_contains: 'train', project: PROJECT.id }))
    fireEvent.click(combobox('Filter by status'))
    fireEvent.click(await screen.findByRole('option', { name: 'stopped', hidden: true }))
    await waitFor(() => expect(lastQuery(seen, '/api/v1/instances/')).toMatchObject({ name_contains: 'train', status: 'stopped' }))
    expect(await screen.findByText('No instances match the filters', undefined, LONG)).toBeInTheDocument()
    fireEvent.click(screen.getByRole('button', { name: 'Clear filters' }))
    await waitFor(() => expect(lastQuery(seen, '/api/v1/instances/')).not.toHaveProperty('name_contains'))
    expect(lastQuery(seen, '/api/v1/instances/')).not.toHaveProperty('status')
    expect(await screen.findByText('No instances yet')).toBeInTheDocument()
    expect(screen.getByRole('searchbox', { name: 'Search by name' })).toHaveValue('')
  })

  it('IB partitions: the table shows what the server answered for the name search', async () => {
    const seen = stubApi({
      'GET /api/v1/ib-partitions/': (request) => json(page(new URL(request.url).searchParams.get('name_contains') === 'zzz' ? [] : [PART])),
    })
    renderPage(<IbPartitionsPanel />)
    expect(await screen.findByRole('cell', { name: 'train' })).toBeInTheDocument()
    fireEvent.change(screen.getByRole('searchbox', { name: 'Search by name' }), { target: { value: 'zzz' } })
    expect(await screen.findByText('No partitions match the filters', undefined, LONG)).toBeInTheDocument()
    expect(lastQuery(seen, '/api/v1/ib-partitions/')).toMatchObject({ project: PROJECT.id, name_contains: 'zzz' })
  })

  it('VPCs: a filtered list starts again on its first page', async () => {
    const seen = stubApi({
      'GET /api/v1/vpcs/': (request) => {
        const q = new URL(request.url).searchParams
        const vpc = { id: q.get('cursor') ?? 'v1', project: PROJECT.id, name: q.get('cursor') ? 'second' : 'first', description: '', cidr: '10.0.0.0/16', ipv6_cidr: '', created_at: '2026-12-01T00:00:00Z', updated_at: '' }
        return json({ results: [vpc], next: q.get('cursor') ? null : 'http://x/api/v1/vpcs/?cursor=c2', previous: q.get('cursor') ? 'http://x/api/v1/vpcs/' : null })
      },
    })
    renderPage(<VpcsPanel />)
    fireEvent.click(await screen.findByRole('button', { name: 'Next' }))
    expect(await screen.findByRole('link', { name: 'second' })).toBeInTheDocument()
    expect(screen.getByText('Page 2')).toBeInTheDocument()
    fireEvent.change(screen.getByRole('searchbox', { name: 'Search by name' }), { target: { value: 'fir' } })
    expect(await screen.findByRole('link', { name: 'first' }, LONG)).toBeInTheDocument()
    const q = lastQuery(seen, '/api/v1/vpcs/')
    expect(q).toMatchObject({ name_contains: 'fir' })
    expect(q).not.toHaveProperty('cursor')
    expect(within(screen.getByRole('navigation', { name: 'Pages' })).getByText('Page 1')).toBeInTheDocument()
  })

  it('tokens: the state filter is the boolean `revoked`', () => {
    expect(tokenFilterQuery({})).toEqual({})
    expect(tokenFilterQuery({ revoked: 'false', scope: 'write' })).toEqual({ revoked: false, scope: 'write' })
    expect(tokenFilterQuery({ revoked: 'true' })).toEqual({ revoked: true })
  })
})
