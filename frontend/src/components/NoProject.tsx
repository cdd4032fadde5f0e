import { Button, Group, TextInput } from '@mantine/core'
import { useQueryClient } from '@tanstack/react-query'
import { useNavigate } from 'react-router'
import { api, unwrap, type Organization, type Project } from '../api/client'
import { projectsQuery, useScope } from '../auth/scope'
import { useCreateForm } from '../hooks/useCreateForm'
import { createsProjects, slugOf } from '../tenancy'
import { EmptyState } from './EmptyState'
import { ProblemAlert } from './ProblemAlert'

/** "Create your first project": the name (its slug derived from it), the API's refusal beside the field; the new
 * project becomes the console's scope and the dashboard shows. */
function CreateFirstProject({ organization }: { organization: Organization }) {
  const { selectProject } = useScope()
  const qc = useQueryClient()
  const navigate = useNavigate()
  const create = useCreateForm({ name: '' }, {
    mutationFn: (v, idempotencyKey): Promise<Project> =>
      unwrap(api.POST('/api/v1/projects/', {
        params: { header: { 'Idempotency-Key': idempotencyKey } },
        body: { organization: organization.id, name: v.name.trim(), slug: slugOf(v.name), description: '' },
      })),
    invalidate: projectsQuery.queryKey,
    onSuccess: (project) => {
      // listed at once (the refetch follows), so the console does not wait for it to leave the empty state
      qc.setQueryData(projectsQuery.queryKey, (old: { results: Project[] } | undefined) =>
        old ? { ...old, results: [...old.results.filter((p) => p.id !== project.id), project] } : old)
      selectProject(project.id)
      void navigate('/')
    },
  })
  const slug = slugOf(create.values.name)
  return (
    <form onSubmit={create.submit} noValidate aria-label="Create your first project" style={{ width: '100%', maxWidth: 420 }}>
      <ProblemAlert error={create.error} title="The project was not created" shownFields={['name', 'slug']} />
      <Group align="flex-start" wrap="nowrap" mt="xs">
        <TextInput
          label="Project name"
          required
          maxLength={200}
          style={{ flex: 1 }}
          description={slug ? `Its slug: ${slug}` : 'e.g. Research'}
          {...create.text('name')}
          error={create.errorOf('name') ?? create.errorOf('slug')}
        />
        <Button type="submit" mt={42} loading={create.mutation.isPending}>
          Create project
        </Button>
      </Group>
    </form>
  )
}

/** The console without a project: an organization owner or admin creates the first one here; anyone else is told
 * to ask for an invitation. The organization's own screens (Members, Billing, API tokens, Audit log) work without
 * one. */
export function NoProject() {
  const { organization } = useScope()
  if (organization && createsProjects(organization.role))
    return (
      <EmptyState title="Create your first project" action={<CreateFirstProject organization={organization} />}>
        {organization.name} has no project yet. Instances, networks and volumes live in a project; Members, Billing,
        API tokens and the Audit log work without one.
      </EmptyState>
    )
  return (
    <EmptyState title="No project yet">
      You are not a member of any project. Ask an organization owner or admin to invite you to one.
    </EmptyState>
  )
}
