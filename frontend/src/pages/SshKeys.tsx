import { Code, Group, Paper, Stack, Table, Text, TextInput, Textarea, Title } from '@mantine/core'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState, type FormEvent } from 'react'
import { api, unwrap } from '../api/client'
import { useScope } from '../auth/scope'
import { ConfirmButton } from '../components/ConfirmButton'
import { EmptyState } from '../components/EmptyState'
import { Pager } from '../components/Pager'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'
import { WriteButton } from '../components/WriteButton'
import { usePaged } from '../hooks/usePaged'

export function SshKeysPage() {
  const { project, canWrite } = useScope()
  const qc = useQueryClient()
  const pid = project?.id ?? ''
  const keys = usePaged(['ssh-keys', pid], (cursor) =>
    unwrap(api.GET('/api/v1/ssh-keys/', { params: { query: { project: pid, cursor, page_size: 50 } } })),
  )
  const [name, setName] = useState('')
  const [publicKey, setPublicKey] = useState('')
  const add = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/ssh-keys/', { body: { project: pid, name, public_key: publicKey } })),
    onSuccess: () => {
      setName('')
      setPublicKey('')
      void qc.invalidateQueries({ queryKey: ['ssh-keys'] })
    },
  })
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/v1/ssh-keys/{id}/', { params: { path: { id } } })),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['ssh-keys'] }),
  })

  const submit = (event: FormEvent) => {
    event.preventDefault()
    add.mutate()
  }
  const rows = keys.data?.results ?? []

  return (
    <Stack>
      <Title order={2}>SSH keys</Title>
      <Text c="dimmed">Public keys of this project, installed for the default user of the instances you launch.</Text>
      <Paper withBorder p="md" component="section" aria-labelledby="add-key">
        <form onSubmit={submit} noValidate>
          <Stack gap="sm">
            <Title order={3} size="h4" id="add-key">
              Add a key
            </Title>
            <ProblemAlert error={add.error} title="The key was not added" shownFields={['name', 'public_key']} />
            <TextInput
              label="Name"
              required
              maxLength={63}
              value={name}
              onChange={(e) => setName(e.currentTarget.value)}
              error={fieldError(add.error, 'name')}
              disabled={!canWrite}
            />
            <Textarea
              label="Public key"
              description="One line in OpenSSH format, e.g. the contents of ~/.ssh/id_ed25519.pub"
              required
              autosize
              minRows={2}
              value={publicKey}
              onChange={(e) => setPublicKey(e.currentTarget.value)}
              error={fieldError(add.error, 'public_key')}
              disabled={!canWrite}
              styles={{ input: { fontFamily: 'monospace' } }}
            />
            <Group>
              <WriteButton type="submit" loading={add.isPending}>
                Add key
              </WriteButton>
            </Group>
          </Stack>
        </form>
      </Paper>
      <ProblemAlert error={keys.error ?? remove.error} />
      {keys.isSuccess && rows.length === 0 && !keys.hasPrevious ? (
        <EmptyState title="No SSH keys yet">
          Add your public key above: instances accept SSH sign-in only with the keys you choose when you launch them.
        </EmptyState>
      ) : (
        <Table striped highlightOnHover aria-label="SSH keys">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Fingerprint</Table.Th>
              <Table.Th>Added</Table.Th>
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((key) => (
              <Table.Tr key={key.id}>
                <Table.Td>{key.name}</Table.Td>
                <Table.Td>
                  <Code>{key.fingerprint}</Code>
                </Table.Td>
                <Table.Td>{new Date(key.created_at).toLocaleString()}</Table.Td>
                <Table.Td ta="right">
                  <ConfirmButton
                    label="Delete"
                    aria-label={`Delete key ${key.name}`}
                    title={`Delete the key “${key.name}”?`}
                    message="Instances launched with it keep it; new instances can no longer choose it."
                    color="red.9"
                    variant="outline"
                    size="xs"
                    loading={remove.isPending && remove.variables === key.id}
                    onConfirm={() => remove.mutate(key.id)}
                  />
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Pager
        pageNumber={keys.pageNumber}
        hasNext={keys.hasNext}
        hasPrevious={keys.hasPrevious}
        onNext={keys.goNext}
        onPrevious={keys.goPrevious}
        loading={keys.isFetching}
      />
    </Stack>
  )
}
