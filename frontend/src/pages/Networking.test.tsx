import { cleanup, fireEvent, screen, waitFor, within } from '@testing-library/react'
import { useLocation } from 'react-router'
import { describe, expect, it } from 'vitest'
import type { SecurityGroup } from '../api/client'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { NetworkingPage } from './Networking'
import { VpcDetailPage, portLabel, ruleRemote, ruleTraffic } from './VpcDetail'

const VPC = { id: '0190a3b4-0000-7000-8000-0000000000c1', project: PROJECT.id, name: 'prod', description: '', cidr: '10.20.0.0/16', ipv6_cidr: '', created_at: '2026-12-01T00:00:00Z', updated_at: '2026-12-01T00:00:00Z' }
const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const RULE = { id: 'r1', security_group: 'sg1', direction: 'ingress', ethertype: 'IPv4', protocol: 'tcp', port_range_min: 22, port_range_max: 22, icmp_type: null, icmp_code: null, remote_ip_prefix: '0.0.0.0/0', remote_group: null, description: '', created_at: '' }
const SG = { id: 'sg1', project: PROJECT.id, vpc: VPC.id, name: 'default', description: '', is_default: true, rules: [RULE], created_at: '', updated_at: '' }

/** The page's URL (path and query), for a test to read and to "reload" at. */
function Url() {
  const location = useLocation()
  return <output data-testid="url">{location.pathname + location.search}</output>
}

/** The input labelled `label` (a Mantine combobox also labels its listbox). */
function input(label: RegExp): HTMLElement {
  return screen.getAllByLabelText(label).find((el) => el.tagName === 'INPUT')!
}

function fill(label: RegExp, value: string) {
  fireEvent.change(input(label), { target: { value } })
}

describe('VPCs', () => {
  it('creates a VPC with what was typed, and marks the field the API refused', async () => {
    let created = false
    const seen = stubApi({
      'GET /api/v1/vpcs/': () => json(page(created ? [VPC] : [])),
      'POST /api/v1/vpcs/': async (request) => {
        const body = await request.json()
        if (body.cidr !== '10.20.0.0/16') return problem(400, 'invalid', 'Invalid input.', { cidr: ['Not inside RFC 1918.'] })
        created = true
        return json(VPC, 201)
      },
    })
    renderPage(<NetworkingPage />)
    expect(await screen.findByText('No VPCs yet')).toBeInTheDocument()
    fill(/^Name/, 'prod')
    fill(/^IPv4 CIDR/, '8.8.0.0/16')
    fireEvent.click(screen.getByRole('button', { name: 'Create VPC' }))
    expect(await screen.findByText('Not inside RFC 1918.')).toBeInTheDocument()
    expect(screen.getByLabelText(/^IPv4 CIDR/)).toHaveAttribute('aria-invalid', 'true')
    expect(screen.getByLabelText(/^Name/)).toHaveValue('prod')
    fill(/^IPv4 CIDR/, '10.20.0.0/16')
    fireEvent.click(screen.getByRole('button', { name: 'Create VPC' }))
    expect(await screen.findByRole('link', { name: 'prod' })).toHaveAttribute('href', `/networking/vpcs/${VPC.id}`)
    const post = seen.filter((r) => r.method === 'POST').at(-1)!
    expect(await post.json()).toEqual({ project: PROJECT.id, name: 'prod', cidr: '10.20.0.0/16', description: '' })
  })

  it('disables create and delete for a viewer', async () => {
    stubApi({ 'GET /api/v1/vpcs/': () => json(page([VPC])) })
    renderPage(<NetworkingPage />, { value: scope({ canWrite: false }) })
    expect(await screen.findByRole('button', { name: 'Delete VPC prod' })).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Create VPC' })).toBeDisabled()
  })
})

const PART = { id: '0190a3b4-0000-7000-8000-0000000000d1', project: PROJECT.id, fabric: 'ib-compute', name: 'train', pkey: 256, pkey_hex: '0x0100', ipoib: true, mtu: 2048, rate_gbps: null, sl: null, index0: false, members: [] as object[], created_at: '2026-12-01T00:00:00Z', updated_at: '2026-12-01T00:00:00Z' }
const MEMBER = { guid: '0x0c42a10300aa0001', membership: 'full', instance_id: 'i1', added_via_api: false, created_at: '' }

async function openPartitions() {
  fireEvent.click(await screen.findByRole('tab', { name: 'InfiniBand partitions' }))
}

describe('InfiniBand partitions', () => {
  it('creates a partition with what was typed, and marks the field the API refused', async () => {
    let created = false
    const seen = stubApi({
      'GET /api/v1/vpcs/': () => json(page([])),
      'GET /api/v1/instances/': () => json(page([])),
      'GET /api/v1/ib-partitions/': () => json(page(created ? [PART] : [])),
      'POST /api/v1/ib-partitions/': async (request) => {
        const body = await request.json()
        if (body.fabric !== 'ib-compute') return problem(400, 'validation_error', 'Invalid input.', { fabric: ['Not found.'] })
        created = true
        return json(PART, 201)
      },
    })
    renderPage(<NetworkingPage />)
    await openPartitions()
    expect(await screen.findByText('No InfiniBand partitions yet')).toBeInTheDocument()
    fill(/^Partition name/, 'train')
    fill(/^Fabric/, 'ib-nowhere')
    fireEvent.click(screen.getByRole('button', { name: 'Create partition' }))
    expect(await screen.findByText('Not found.')).toBeInTheDocument()
    expect(input(/^Fabric/)).toHaveAttribute('aria-invalid', 'true')
    expect(screen.getByLabelText(/^Partition name/)).toHaveValue('train')
    fill(/^Fabric/, 'ib-compute')
    fireEvent.click(screen.getByRole('button', { name: 'Create partition' }))
    const row = await screen.findByRole('row', { name: /train/ })
    expect(row).toHaveTextContent('ib-compute')
    expect(row).toHaveTextContent('0x0100')
    const posts = seen.filter((r) => r.method === 'POST')
    expect(posts[0].headers.get('Idempotency-Key')).not.toEqual(posts[1].headers.get('Idempotency-Key'))
    expect(await posts[1].json()).toEqual({ project: PROJECT.id, name: 'train', fabric: 'ib-compute', ipoib: true, index0: false })
    // the new partition's members open below the list
    expect(await screen.findByText(/No members yet/)).toBeInTheDocument()
  })

  it('deletes a partition after confirmation and shows why one with members is refused', async () => {
    const seen = stubApi({
      'GET /api/v1/vpcs/': () => json(page([])),
      'GET /api/v1/ib-partitions/': () => json(page([PART])),
      [`DELETE /api/v1/ib-partitions/${PART.id}/`]: () => problem(409, 'in_use', 'The partition still has members.'),
    })
    renderPage(<NetworkingPage />)
    await openPartitions()
    fireEvent.click(await screen.findByRole('button', { name: 'Delete partition train' }))
    expect(seen.some((r) => r.method === 'DELETE')).toBe(false)
    fireEvent.click(within(await screen.findByRole('dialog')).getByRole('button', { name: 'Delete' }))
    expect(await screen.findByText('The partition still has members.')).toBeInTheDocument()
    expect(screen.getByText('The partition was not deleted')).toBeInTheDocument()
    expect(seen.filter((r) => r.method === 'DELETE')).toHaveLength(1)
  })

  it('lists members, adds a GUID as a limited member, marks a refused GUID, and removes only added members', async () => {
    const added = { ...MEMBER, guid: '0x0c42a10300aa0002', membership: 'limited', added_via_api: true }
    let members: object[] = [MEMBER]
    const seen = stubApi({
      'GET /api/v1/vpcs/': () => json(page([])),
      'GET /api/v1/instances/': () => json(page([{ id: 'i1', name: 'trainer-0' }])),
      'GET /api/v1/ib-partitions/': () => json(page([{ ...PART, members }])),
      [`POST /api/v1/ib-partitions/${PART.id}/members/`]: async (request) => {
        const body = await request.json()
        if (body.guid !== added.guid) return problem(400, 'validation_error', 'Invalid input.', { guid: ['Not found.'] })
        members = [MEMBER, added]
        return json({ ...PART, members }, 201)
      },
      [`DELETE /api/v1/ib-partitions/${PART.id}/members/${added.guid}/`]: () => {
        members = [MEMBER]
        return new Response(null, { status: 204 })
      },
    })
    renderPage(<NetworkingPage />)
    await openPartitions()
    fireEvent.click(await screen.findByRole('button', { name: 'Members of train' }))
    const table = await screen.findByRole('table', { name: 'Members of train' })
    expect(await within(table).findByText('trainer-0')).toBeInTheDocument()
    expect(within(table).getByText('leaves with its instance')).toBeInTheDocument()
    expect(screen.queryByRole('button', { name: `Remove member ${MEMBER.guid}` })).toBeNull()
    fill(/^Port GUID/, '0x0c42a103ffff0001')
    fireEvent.click(screen.getByRole('button', { name: 'Add member' }))
    expect(await screen.findByText('Not found.')).toBeInTheDocument()
    expect(screen.getByLabelText(/^Port GUID/)).toHaveAttribute('aria-invalid', 'true')
    fill(/^Port GUID/, added.guid)
    fireEvent.click(screen.getByRole('button', { name: 'Add member' }))
    const remove = await screen.findByRole('button', { name: `Remove member ${added.guid}` })
    const post = seen.filter((r) => r.method === 'POST').at(-1)!
    expect(await post.json()).toEqual({ guid: added.guid, membership: 'limited' })
    fireEvent.click(remove)
    fireEvent.click(within(await screen.findByRole('dialog')).getByRole('button', { name: 'Remove' }))
    await waitFor(() => expect(screen.queryByRole('button', { name: `Remove member ${added.guid}` })).toBeNull())
    expect(seen.filter((r) => r.method === 'DELETE')).toHaveLength(1)
  })

  it('disables create, delete and adding members for a viewer', async () => {
    stubApi({ 'GET /api/v1/vpcs/': () => json(page([])), 'GET /api/v1/ib-partitions/': () => json(page([PART])) })
    renderPage(<NetworkingPage />, { value: scope({ canWrite: false }) })
    await openPartitions()
    expect(await screen.findByRole('button', { name: 'Delete partition train' })).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Create partition' })).toBeDisabled()
    fireEvent.click(screen.getByRole('button', { name: 'Members of train' }))
    expect(await screen.findByRole('button', { name: 'Add member' })).toBeDisabled()
  })
})

describe('a VPC', () => {
  it('adds a rule to a security group with the form’s values', async () => {
    const seen = stubApi({
      [`GET /api/v1/vpcs/${VPC.id}/`]: () => json(VPC),
      'GET /api/v1/subnets/': () => json(page([])),
      'GET /api/v1/security-groups/': () => json(page([SG])),
      'POST /api/v1/security-group-rules/': () => json({ ...RULE, id: 'r2', port_range_min: 443, port_range_max: 443 }, 201),
    })
    renderPage(<VpcDetailPage />, { path: `/networking/vpcs/${VPC.id}`, route: '/networking/vpcs/:id' })
    expect(await screen.findByRole('heading', { name: 'prod' })).toBeInTheDocument()
    fireEvent.click(screen.getByRole('tab', { name: 'Security groups' }))
    expect(await screen.findByRole('table', { name: 'Rules of default' })).toHaveTextContent('tcp 22')
    fill(/^From port \(default\)/, '443')
    fireEvent.click(screen.getByRole('button', { name: 'Add rule to default' }))
    await waitFor(() => expect(seen.some((r) => r.method === 'POST')).toBe(true))
    const post = seen.find((r) => r.method === 'POST')!
    expect(await post.json()).toEqual({ security_group: 'sg1', direction: 'ingress', ethertype: 'IPv4', protocol: 'tcp', port_range_min: 443, port_range_max: 443 })
  })

  it('answers "Not found" for another tenant’s VPC', async () => {
    stubApi({})
    renderPage(<VpcDetailPage />, { path: `/networking/vpcs/${VPC.id}`, route: '/networking/vpcs/:id' })
    expect(await screen.findByRole('heading', { name: 'Not found' })).toBeInTheDocument()
  })
})

describe('the tabs in the URL', () => {
  it('opens the Networking tab the URL names, and a reload (or Back to the page) opens the tab that was shown', async () => {
    stubApi({
      'GET /api/v1/vpcs/': () => json(page([VPC])),
      'GET /api/v1/instances/': () => json(page([])),
      'GET /api/v1/ib-partitions/': () => json(page([PART])),
    })
    renderPage(<><NetworkingPage /><Url /></>, { path: '/networking' })
    await openPartitions()
    await waitFor(() => expect(screen.getByTestId('url')).toHaveTextContent('/networking?tab=ib-partitions'))
    const reloadAt = screen.getByTestId('url').textContent!
    cleanup()
    renderPage(<><NetworkingPage /><Url /></>, { path: reloadAt })
    expect(await screen.findByRole('tab', { name: 'InfiniBand partitions' })).toHaveAttribute('aria-selected', 'true')
    expect(await screen.findByRole('row', { name: /train/ })).toBeInTheDocument()
    fireEvent.click(screen.getByRole('tab', { name: 'VPCs' }))   // the first tab: left out of the URL
    await waitFor(() => expect(screen.getByTestId('url').textContent).toBe('/networking'))
    expect(await screen.findByRole('row', { name: /prod/ })).toBeInTheDocument()
  })

  it('opens the VPC’s tab the URL names; an unknown one opens the first', async () => {
    stubApi({
      [`GET /api/v1/vpcs/${VPC.id}/`]: () => json(VPC),
      'GET /api/v1/subnets/': () => json(page([])),
      'GET /api/v1/security-groups/': () => json(page([SG])),
    })
    renderPage(<><VpcDetailPage /><Url /></>, { path: `/networking/vpcs/${VPC.id}`, route: '/networking/vpcs/:id' })
    fireEvent.click(await screen.findByRole('tab', { name: 'Security groups' }))
    await waitFor(() => expect(screen.getByTestId('url')).toHaveTextContent(`/networking/vpcs/${VPC.id}?tab=security-groups`))
    const reloadAt = screen.getByTestId('url').textContent!
    cleanup()
    renderPage(<VpcDetailPage />, { path: reloadAt, route: '/networking/vpcs/:id' })
    expect(await screen.findByRole('tab', { name: 'Security groups' })).toHaveAttribute('aria-selected', 'true')
    expect(await screen.findByRole('table', { name: 'Rules of default' })).toHaveTextContent('tcp 22')
    cleanup()
    renderPage(<VpcDetailPage />, { path: `/networking/vpcs/${VPC.id}?tab=nonsense`, route: '/networking/vpcs/:id' })
    expect(await screen.findByRole('tab', { name: 'Subnets' })).toHaveAttribute('aria-selected', 'true')
  })
})

describe('rule and port labels', () => {
  it('say what traffic a rule allows and from where', () => {
    expect(ruleTraffic(RULE)).toBe('tcp 22')
    expect(ruleTraffic({ ...RULE, port_range_min: 1000, port_range_max: 2000 })).toBe('tcp 1000-2000')
    expect(ruleTraffic({ ...RULE, protocol: 'icmp', port_range_min: null, port_range_max: null, icmp_type: 8 })).toBe('icmp type 8')
    expect(ruleTraffic({ ...RULE, protocol: '', port_range_min: null, port_range_max: null })).toBe('any')
    expect(ruleTraffic({ ...RULE, protocol: 'udp', port_range_min: null, port_range_max: null })).toBe('udp (all)')
    const groups = new Map([['sg1', SG as SecurityGroup]])
    expect(ruleRemote({ remote_ip_prefix: '', remote_group: 'sg1' }, groups)).toBe('group default')
    expect(ruleRemote({ remote_ip_prefix: '', remote_group: null }, groups)).toBe('anywhere')
  })

  it('names a port by its address and instance', () => {
    const port = { id: 'p', fixed_ips: [{ subnet: 's', ip_address: '10.20.1.5' }], mac_address: '0a:58:00:00:00:01', instance_id: 'i1', name: '' }
    expect(portLabel(port as never, new Map([['i1', 'notebook']]))).toBe('10.20.1.5 · notebook')
    expect(portLabel({ ...port, instance_id: null, name: 'vip' } as never, new Map())).toBe('10.20.1.5 · vip')
  })
})
