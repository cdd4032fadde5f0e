import { Code, Stack, Text, TextInput, Textarea, Title } from '@mantine/core'
import { api, unwrap } from '../api/client'
import { useScope } from '../auth/scope'
import { CreateForm } from '../components/CreateForm'
import { DeleteButton } from '../components/DeleteButton'
import { FilterBar, SearchFilter } from '../components/ListFilters'
import { ProblemAlert } from '../components/ProblemAlert'
import { ResourceTable } from '../components/ResourceTable'
import { useCreateForm } from '../hooks/useCreateForm'
import { useListFilters } from '../hooks/useListFilters'
import { usePaged } from '../hooks/usePaged'
import { useRemove } from '../hooks/useRemove'

export function SshKeysPage() {
  const { project, canWrite } = useScope()
  const pid = project?.id ?? ''
  const filters = useListFilters({ name_contains: '' })
  const keys = usePaged(['ssh-keys', pid, filters.query], (cursor) =>
    unwrap(api.GET('/api/v1/ssh-keys/', { params: { query: { project: pid, ...filters.query, cursor, page_size: 50 } } })),
  )
  const add = useCreateForm({ name: '', public_key: '' }, {
    mutationFn: (v) => unwrap(api.POST('/api/v1/ssh-keys/', { body: { project: pid, ...v } })),
    invalidate: ['ssh-keys'],
  })
  const remove = useRemove((id: string) => unwrap(api.DELETE('/api/v1/ssh-keys/{id}/', { params: { path: { id } } })), ['ssh-keys'])

  return (
    <Stack>
      <Title order={2}>SSH keys</Title>
      <Text c="dimmed">Public keys of this project, installed for the default user of the instances you launch.</Text>
      <CreateForm id="add-key" title="Add a key" error={add.error} errorTitle="The key was not added"
        fields={['name', 'public_key']} onSubmit={add.submit} submitLabel="Add key" loading={add.mutation.isPending}>
        <TextInput label="Name" required maxLength={63} {...add.text('name')} disabled={!canWrite} />
        <Textarea
          label="Public key"
          description="One line in OpenSSH format, e.g. the contents of ~/.ssh/id_ed25519.pub"
          required
          autosize
          minRows={2}
          {...add.text('public_key')}
          disabled={!canWrite}
          styles={{ input: { fontFamily: 'monospace' } }}
        />
      </CreateForm>
      <FilterBar label="Filter SSH keys">
        <SearchFilter filters={filters} />
      </FilterBar>
      <ProblemAlert error={keys.error ?? remove.error} />
      <ResourceTable
        label="SSH keys"
        rows={keys.data?.results ?? []}
        rowKey={(key) => key.id}
        list={keys}
        filters={filters}
        empty={{
          title: 'No SSH keys yet',
          text: 'Add your public key above: instances accept SSH sign-in only with the keys you choose when you launch them.',
        }}
        columns={[
          { header: 'Name', cell: (key) => key.name },
          { header: 'Fingerprint', cell: (key) => <Code>{key.fingerprint}</Code> },
          { header: 'Added', cell: (key) => new Date(key.created_at).toLocaleString() },
        ]}
        actions={(key) => (
          <DeleteButton remove={remove} target={key.id} name={`Delete key ${key.name}`}
            title={`Delete the key “${key.name}”?`}
            message="Instances launched with it keep it; new instances can no longer choose it." />
        )}
      />
    </Stack>
  )
}
