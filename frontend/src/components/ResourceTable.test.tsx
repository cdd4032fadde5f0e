import { TextInput } from '@mantine/core'
import { fireEvent, screen, waitFor } from '@testing-library/react'
import { describe, expect, it, vi } from 'vitest'
import { ApiError } from '../api/client'
import { useCreateForm } from '../hooks/useCreateForm'
import { useListFilters } from '../hooks/useListFilters'
import { useRemove } from '../hooks/useRemove'
import { json, problem, renderPage, scope, stubApi } from '../test/render'
import { CreateForm } from './CreateForm'
import { DeleteButton } from './DeleteButton'
import { FilterBar, SearchFilter } from './ListFilters'
import { ResourceTable, plural } from './ResourceTable'

interface Row { id: string; name: string }
const ROWS: Row[] = [{ id: 'a', name: 'alpha' }, { id: 'b', name: 'beta' }]
const EMPTY = { title: 'No things yet', text: 'Create one above.' }

describe('ResourceTable', () => {
  it('shows a named table with its columns, a hidden actions header and the row actions', () => {
    renderPage(<ResourceTable label="Things" rows={ROWS} rowKey={(r) => r.id} list={{ isSuccess: true }} empty={EMPTY}
      columns={[{ header: 'Name', cell: (r) => r.name }]} actions={(r) => <button>Open {r.name}</button>} />)
    const table = screen.getByRole('table', { name: 'Things' })
    expect(table).toHaveTextContent('alpha')
    expect(screen.getByRole('columnheader', { name: 'Actions' })).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Open beta' })).toBeInTheDocument()
  })

  it('says what to do next when the list is empty, and offers to clear active filters when nothing matches', () => {
    const clear = vi.fn()
    const first = renderPage(<ResourceTable label="Things" rows={[]} rowKey={(r: Row) => r.id}
      list={{ isSuccess: true }} empty={EMPTY} columns={[]} />)
    expect(screen.getByText('No things yet')).toBeInTheDocument()
    expect(screen.getByText('Create one above.')).toBeInTheDocument()
    expect(screen.queryByRole('table')).toBeNull()
    first.unmount()
    renderPage(<ResourceTable label="Things" rows={[]} rowKey={(r: Row) => r.id} list={{ isSuccess: true }} empty={EMPTY}
      columns={[]} filters={{ active: true, clear }} />)
    expect(screen.getByText('No things match the filters')).toBeInTheDocument()
    fireEvent.click(screen.getByRole('button', { name: 'Clear filters' }))
    expect(clear).toHaveBeenCalled()
  })

  it('keeps the table on a later empty page and shows the pager of a paged list', () => {
    const goPrevious = vi.fn()
    renderPage(<ResourceTable label="Things" rows={[]} rowKey={(r: Row) => r.id} empty={EMPTY} columns={[]}
      list={{ isSuccess: true, hasPrevious: true, hasNext: false, pageNumber: 2, goPrevious }} />)
    expect(screen.queryByText('No things yet')).toBeNull()
    expect(screen.getByText('Page 2')).toBeInTheDocument()
    fireEvent.click(screen.getByRole('button', { name: 'Previous' }))
    expect(goPrevious).toHaveBeenCalled()
  })
})

function ThingForm({ onCreated }: { onCreated?: (r: Row) => void }) {
  const form = useCreateForm({ name: '', note: '' }, {
    mutationFn: async (v, key) => {
      const r = await fetch(new Request(`${location.origin}/api/things/`, { method: 'POST', body: JSON.stringify(v), headers: { 'Idempotency-Key': key } }))
      const body = await r.json()
      if (!r.ok) throw new ApiError(r.status, body)
      return body as Row
    },
    invalidate: ['things'],
    clear: ['name'],
    onSuccess: (r) => onCreated?.(r),
  })
  return (
    <CreateForm id="create-thing" title="Create a thing" error={form.error} errorTitle="The thing was not created"
      fields={['name']} onSubmit={form.submit} submitLabel="Create thing" loading={form.mutation.isPending}>
      <TextInput label="Name" {...form.text('name')} />
      <TextInput label="Note" {...form.text('note')} />
    </CreateForm>
  )
}

describe('CreateForm with useCreateForm', () => {
  it('keeps what was typed when the server refuses and marks the field it names; clears the chosen fields on success', async () => {
    let refuse = true
    const seen = stubApi({
      'POST /api/things/': async (request) => {
        const body = await request.json()
        if (refuse) return problem(400, 'validation_error', 'Invalid input.', { name: ['Name taken.'], other: ['Odd.'] })
        return json({ id: 'n', name: body.name }, 201)
      },
    })
    const onCreated = vi.fn()
    renderPage(<ThingForm onCreated={onCreated} />)
    expect(screen.getByRole('region', { name: 'Create a thing' })).toBeInTheDocument()
    fireEvent.change(screen.getByLabelText('Name'), { target: { value: 'gamma' } })
    fireEvent.change(screen.getByLabelText('Note'), { target: { value: 'keep me' } })
    fireEvent.click(screen.getByRole('button', { name: 'Create thing' }))
    expect(await screen.findByText('Name taken.')).toBeInTheDocument()
    expect(screen.getByLabelText('Name')).toHaveAttribute('aria-invalid', 'true')
    expect(screen.getByLabelText('Name')).toHaveValue('gamma')
    expect(screen.getByLabelText('Note')).toHaveValue('keep me')
    expect(screen.getByRole('alert')).toHaveTextContent('The thing was not created')
    expect(screen.getByRole('alert')).toHaveTextContent('Other: Odd.')
    expect(screen.getByRole('alert')).not.toHaveTextContent('Name: Name taken.')
    refuse = false
    fireEvent.click(screen.getByRole('button', { name: 'Create thing' }))
    await waitFor(() => expect(onCreated).toHaveBeenCalledWith({ id: 'n', name: 'gamma' }))
    expect(screen.getByLabelText('Name')).toHaveValue('')
    expect(screen.getByLabelText('Note')).toHaveValue('keep me')
    const keys = seen.map((r) => r.headers.get('Idempotency-Key'))
    expect(keys[0]).toBeTruthy()
    expect(keys[1]).not.toEqual(keys[0])
  })

  it('disables the submit button for a viewer', () => {
    renderPage(<ThingForm />, { value: scope({ canWrite: false }) })
    expect(screen.getByRole('button', { name: 'Create thing' })).toBeDisabled()
  })
})

function ThingDelete() {
  const remove = useRemove((id: string) => fetch(new Request(`${location.origin}/api/things/${id}/`, { method: 'DELETE' })), ['things'])
  return (
    <>
      <DeleteButton remove={remove} target="a" name="Delete thing alpha" title="Delete alpha?" message="It goes." />
      {remove.isSuccess && <p>deleted {remove.variables}</p>}
    </>
  )
}

describe('DeleteButton with useRemove', () => {
  it('asks first, then deletes that row', async () => {
    const seen = stubApi({ 'DELETE /api/things/a/': () => new Response(null, { status: 204 }) })
    renderPage(<ThingDelete />)
    fireEvent.click(screen.getByRole('button', { name: 'Delete thing alpha' }))
    expect(seen).toHaveLength(0)
    expect(await screen.findByText('It goes.')).toBeInTheDocument()
    fireEvent.click(screen.getByRole('button', { name: 'Delete' }))
    expect(await screen.findByText('deleted a')).toBeInTheDocument()
    expect(seen.map((r) => `${r.method} ${new URL(r.url).pathname}`)).toEqual(['DELETE /api/things/a/'])
  })
})

function Filtered() {
  const filters = useListFilters({ name_contains: '', status: null as string | null })
  return (
    <>
      <FilterBar label="Filter things">
        <SearchFilter filters={filters} />
      </FilterBar>
      <button onClick={() => filters.set('status', 'active')}>active</button>
      <button onClick={filters.clear}>clear</button>
      <p data-testid="query">{JSON.stringify(filters.query)}</p>
      <p data-testid="active">{String(filters.active)}</p>
    </>
  )
}

describe('useListFilters', () => {
  it('sends only the filters given, a name search once typing pauses, and clears at once', async () => {
    renderPage(<Filtered />)
    expect(screen.getByRole('search', { name: 'Filter things' })).toBeInTheDocument()
    expect(screen.getByTestId('query')).toHaveTextContent('{}')
    fireEvent.change(screen.getByRole('searchbox', { name: 'Search by name' }), { target: { value: ' tra ' } })
    expect(screen.getByTestId('active')).toHaveTextContent('true')
    expect(screen.getByTestId('query')).toHaveTextContent('{}')
    await waitFor(() => expect(screen.getByTestId('query')).toHaveTextContent('{"name_contains":"tra"}'))
    fireEvent.click(screen.getByRole('button', { name: 'active' }))
    await waitFor(() => expect(screen.getByTestId('query')).toHaveTextContent('{"name_contains":"tra","status":"active"}'))
    fireEvent.click(screen.getByRole('button', { name: 'clear' }))
    expect(screen.getByTestId('query')).toHaveTextContent('{}')
    expect(screen.getByTestId('active')).toHaveTextContent('false')
  })
})

describe('plural', () => {
  it('keeps acronyms in the empty state of a filtered list', () => {
    expect(plural('VPCs')).toBe('VPCs')
    expect(plural('SSH keys')).toBe('SSH keys')
    expect(plural('Floating IPs')).toBe('floating IPs')
    expect(plural('Members')).toBe('members')
  })
})
