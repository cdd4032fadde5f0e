import { fireEvent, screen, waitFor, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { PROJECT, json, problem, renderPage, scope, stubApi } from '../test/render'
import { VolumesPage, attachedTo, createBody, guestPath, type Volume } from './Volumes'

const page = <T,>(results: T[]) => ({ results, next: null, previous: null })
const TYPE = { id: 't1', name: 'ssd', description: '', backend: 'libvirt', pool: '', pool_kind: '', pool_target_path: '', pool_source: '', iops_class: 'high', throughput_class: '', zones: [], multi_attach: false, host_local: false, min_size_gib: 1, max_size_gib: 1000, is_active: true, sku: 'volume:type=ssd', created_at: '', updated_at: '' }
const VOL: Volume = { id: '0190a3b4-0000-7000-8000-0000000000v1', project: PROJECT.id, name: 'data', description: '', size_gib: 20, volume_type: 't1', status: 'available', source_snapshot: null, source_image: null, zone: null, delete_on_termination: false, bootable: false, attachments: [], error_code: '', error_reason: '', created_at: '2026-12-01T00:00:00Z', updated_at: '2026-12-01T00:00:00Z', deleted_at: null }
const VM = { id: 'i1', name: 'vm-1', status: 'active' }
const accepted = (volume: Volume) => json({ volume, operation: { id: 'op1' } }, 202)

function fill(label: RegExp, value: string) {
  fireEvent.change(screen.getByLabelText(label), { target: { value } })
}

function routes(volumes: () => Volume[], extra: Record<string, (r: Request) => Response | Promise<Response>> = {}) {
  return stubApi({
    'GET /api/v1/volume-types/': () => json(page([TYPE])),
    'GET /api/v1/instances/': () => json(page([VM, { id: 'i2', name: 'gone', status: 'deleted' }])),
    'GET /api/v1/snapshots/': () => json(page([])),
    'GET /api/v1/volumes/': () => json(page(volumes())),
    ...extra,
  })
}

describe('volume logic', () => {
  it('builds the create body: an empty volume names its type and size, a restore its snapshot', () => {
    expect(createBody('p', { name: 'a', volumeType: 't1', sizeGib: 10, snapshot: null })).toEqual({
      project: 'p', name: 'a', description: '', delete_on_termination: false, volume_type: 't1', size_gib: 10 })
    expect(createBody('p', { name: 'b', volumeType: 't1', sizeGib: '', snapshot: 's1' })).toEqual({
      project: 'p', name: 'b', description: '', delete_on_termination: false, source_snapshot: 's1' })
    expect(createBody('p', { name: 'b', volumeType: null, sizeGib: 50, snapshot: 's1' })).toMatchObject({ size_gib: 50 })
  })

  it('names attachments and the guest disk', () => {
    const att = { instance: 'i1', device: 'vdb', boot: false, status: 'attached' as const, created_at: '' }
    expect(attachedTo({ attachments: [] }, new Map())).toBe('—')
    expect(attachedTo({ attachments: [att, { ...att, instance: '0190ffff-0000-7000-8000-0000aaaabbbb', device: 'vdc' }] }, new Map([['i1', 'vm-1']])))
      .toBe('vm-1 (vdb), aaaabbbb (vdc)')
    expect(guestPath('0190a3b4-0000-7000-8000-000000000001')).toBe('/dev/disk/by-id/virtio-0190a3b4000070008000')
  })
})

describe('the Volumes screen', () => {
  it('creates a volume with what was typed, and marks the field the API refused', async () => {
    let created = false
    const seen = routes(() => (created ? [VOL] : []), {
      'POST /api/v1/volumes/': async (request) => {
        const body = await request.json()
        if (body.size_gib > 1000) return problem(400, 'validation_error', 'Invalid input.', { size_gib: ['1..1000'] })
        created = true
        return accepted(VOL)
      },
    })
    renderPage(<VolumesPage />)
    expect(await screen.findByText('No volumes yet')).toBeInTheDocument()
    fill(/^Name/, 'data')
    fireEvent.click(screen.getAllByLabelText(/^Type/)[0])
    fireEvent.click(await screen.findByRole('option', { name: /^ssd/, hidden: true }))
    fill(/^Size \(GiB\)/, '5000')
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }))
    expect(await screen.findByText('1..1000')).toBeInTheDocument()
    expect(screen.getByLabelText(/^Size \(GiB\)/)).toHaveAttribute('aria-invalid', 'true')
    expect(screen.getByLabelText(/^Name/)).toHaveValue('data')
    fill(/^Size \(GiB\)/, '20')
    fireEvent.click(screen.getByRole('button', { name: 'Create volume' }))
    const table = await screen.findByRole('table', { name: 'Volumes' })
    expect(await within(table).findByText('ssd')).toBeInTheDocument()
    expect(table).toHaveTextContent('20 GiB')
    expect(await screen.findByRole('heading', { name: 'Volume data' })).toBeInTheDocument() // the new volume's panel
    const post = seen.filter((r) => r.method === 'POST').at(-1)!
    expect(await post.json()).toEqual({ project: PROJECT.id, name: 'data', description: '', delete_on_termination: false, volume_type: 't1', size_gib: 20 })
  }, 20_000) // many steps: a loaded machine takes more than the default 5 s

  it('shows the server’s refusal of a smaller size on the field, attaches to an instance, and shows a refused delete in the panel', async () => {
    const seen = routes(() => [VOL], {
      [`POST /api/v1/volumes/${VOL.id}/extend/`]: () =>
        problem(400, 'size_must_grow', 'size_gib must be larger than the volume’s 20 GiB; volumes only grow.', {
          size_gib: ['Must be larger than 20 GiB: volumes never shrink.'] }),
      [`POST /api/v1/volumes/${VOL.id}/attach/`]: () => accepted({ ...VOL, status: 'attaching' }),
      [`DELETE /api/v1/volumes/${VOL.id}/`]: () =>
        problem(409, 'invalid_state', 'The volume is in-use; allowed: available, error.', undefined),
    })
    renderPage(<VolumesPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Manage volume data' }))
    const panel = await screen.findByRole('region', { name: 'Volume data' })
    fill(/^New size \(GiB\)/, '10')
    fireEvent.click(within(panel).getByRole('button', { name: 'Resize' }))
    expect(await within(panel).findByText('Must be larger than 20 GiB: volumes never shrink.')).toBeInTheDocument()
    expect(screen.getByLabelText(/^New size \(GiB\)/)).toHaveAttribute('aria-invalid', 'true')

    fireEvent.click(within(panel).getAllByLabelText(/^Instance/)[0])
    expect(screen.queryByRole('option', { name: /gone/, hidden: true })).toBeNull() // a deleted instance is no choice
    fireEvent.click(await screen.findByRole('option', { name: 'vm-1 (active)', hidden: true }))
    fireEvent.click(within(panel).getByRole('button', { name: 'Attach' }))
    await waitFor(() => expect(seen.some((r) => r.url.endsWith('/attach/'))).toBe(true))
    expect(await seen.find((r) => r.url.endsWith('/attach/'))!.json()).toEqual({ instance: 'i1' })

    fireEvent.click(within(panel).getByRole('button', { name: 'Delete volume data' }))
    fireEvent.click(await screen.findByRole('button', { name: 'Delete volume' }))
    expect(await within(panel).findByText('The volume is in-use; allowed: available, error.')).toBeInTheDocument()
  }, 20_000)

  it('disables the write actions for a viewer', async () => {
    routes(() => [VOL])
    renderPage(<VolumesPage />, { value: scope({ canWrite: false }) })
    expect(await screen.findByRole('button', { name: 'Create volume' })).toBeDisabled()
    fireEvent.click(await screen.findByRole('button', { name: 'Manage volume data' }))
    expect(await screen.findByRole('button', { name: 'Delete volume data' })).toBeDisabled()
    expect(screen.getByRole('button', { name: 'Take snapshot' })).toBeDisabled()
  })

  it('shows why a volume is in error in the list', async () => {
    routes(() => [{ ...VOL, status: 'error', error_code: 'storage_failed', error_reason: 'The pool is full.' }])
    renderPage(<VolumesPage />)
    expect(await screen.findByText('The pool is full.')).toBeInTheDocument()
  })
})
