import { Alert, AppShell, Burger, Group, Loader, NavLink, Select, Text, Button, Title } from '@mantine/core'
import { useDisclosure } from '@mantine/hooks'
import { Link, Navigate, Outlet, matchPath, useLocation, useNavigate, useNavigation } from 'react-router'
import { isAdminPath, useScope } from '../auth/scope'
import { useSession, useSignOut } from '../auth/session'
import { useIsStaff, useMe } from '../auth/staff'
import { isOrganizationPath } from '../tenancy'
import { NoProject } from './NoProject'
import { READ_ONLY_HINT } from './WriteButton'

const NAV = [
  { to: '/', label: 'Dashboard', end: true },
  { to: '/instances', label: 'Instances', end: true },
  { to: '/instances/new', label: 'Launch instance', end: true },
  { to: '/clusters', label: 'Clusters', end: false },
  { to: '/health-events', label: 'Health events', end: true },
  { to: '/leases', label: 'Leases', end: true },
  { to: '/networking', label: 'Networking', end: false },
  { to: '/volumes', label: 'Volumes', end: true },
  { to: '/ssh-keys', label: 'SSH keys', end: true },
  { to: '/api-tokens', label: 'API tokens', end: true },
  { to: '/members', label: 'Members', end: true },
  { to: '/audit-log', label: 'Audit log', end: true },
  { to: '/billing', label: 'Billing', end: false },
]

/** The admin portal's screens: shown to provider staff only (`/me/`'s `staff_role`). */
const ADMIN_NAV = [
  { to: '/staff/fleet', label: 'Fleet', end: true },
  { to: '/staff/billing', label: 'Billing', end: false },
  { to: '/staff/capacity', label: 'Capacity', end: true },
  { to: '/staff/tenants', label: 'Tenants', end: true },
  { to: '/staff/incidents', label: 'Incidents', end: true },
  { to: '/staff/health-events', label: 'Health events', end: true },
  { to: '/staff/audit-log', label: 'Audit', end: true },
]

export function Layout() {
  const [opened, { toggle }] = useDisclosure()
  const scope = useScope()
  const session = useSession()
  const signOut = useSignOut()
  const navigate = useNavigate()
  const location = useLocation()
  // a screen opened for the first time shows once its chunk is loaded: till then, say it is coming
  const navigating = useNavigation().state === 'loading'
  const orgProjects = scope.projects.filter((p) => p.organization === scope.organization?.id)
  const staff = useIsStaff()
  // admin screens work on the provider's fleet, not in a project: they show without one
  const admin = isAdminPath(location.pathname)
  // provider staff who belong to no organization have no tenant screens: only the admin ones (a staff member who
  // is also a tenant sees both, each under its heading). Staff read every organization, so the lists do not say it:
  // `/me/`'s memberships do (docs/adr/0104: staff act in an organization only by a membership)
  const memberships = useMe().data?.memberships ?? []
  const tenantNav = !staff || memberships.length > 0

  const link = (item: { to: string; label: string; end: boolean }) => (
    <NavLink
      key={item.to}
      component={Link}
      to={item.to}
      label={item.label}
      active={matchPath({ path: item.to, end: item.end }, location.pathname) !== null}
      aria-current={matchPath({ path: item.to, end: item.end }, location.pathname) ? 'page' : undefined}
      onClick={() => opened && toggle()}
    />
  )

  return (
    <AppShell
      header={{ height: 64 }}
      navbar={{ width: 220, breakpoint: 'sm', collapsed: { mobile: !opened } }}
      padding="md"
    >
      {/* the first stop of Tab: past the header and the navigation, to the screen itself */}
      <a
        href="#main"
        className="skip-link"
        onClick={(event) => {
          event.preventDefault()
          document.getElementById('main')?.focus()
        }}
      >
        Skip to main content
      </a>
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Title order={1} size="h3">
              <Link to="/" style={{ color: 'inherit', textDecoration: 'none' }}>
                gpucloud
              </Link>
            </Title>
            {navigating && <Loader size="xs" role="status" aria-label="Opening the screen" />}
          </Group>
          <Group wrap="nowrap" gap="sm">
            {!admin && (<>
            <Select
              aria-label="Organization"
              placeholder="Organization"
              size="sm"
              w={170}
              data={scope.organizations.map((o) => ({ value: o.id, label: o.name }))}
              value={scope.organization?.id ?? null}
              onChange={(id) => id && scope.selectOrganization(id)}
              allowDeselect={false}
              data-testid="org-switcher"
            />
            <Select
              aria-label="Project"
              placeholder="Project"
              size="sm"
              w={170}
              data={orgProjects.map((p) => ({ value: p.id, label: p.name }))}
              value={scope.project?.id ?? null}
              onChange={(id) => id && scope.selectProject(id)}
              allowDeselect={false}
              data-testid="project-switcher"
            />
            </>)}
            <Text size="sm" c="dimmed" visibleFrom="md" data-testid="user-email">
              {session.data?.email}
            </Text>
            <Button
              variant="default"
              size="sm"
              loading={signOut.isPending}
              onClick={() => signOut.mutate(undefined, { onSettled: () => navigate('/sign-in') })}
            >
              Sign out
            </Button>
          </Group>
        </Group>
      </AppShell.Header>
      {/* the links scroll inside the bar when they are taller than the window (the staff list at 800 px) */}
      <AppShell.Navbar p="xs" aria-label="Main" style={{ overflowY: 'auto' }}>
        {tenantNav && staff && (
          <Text size="xs" fw={700} c="dimmed" tt="uppercase" px="sm" data-testid="tenant-nav">
            {scope.organization?.name ?? 'Organization'}
          </Text>
        )}
        {tenantNav && NAV.map(link)}
        {staff && (
          <>
            <Text size="xs" fw={700} c="dimmed" tt="uppercase" mt="md" px="sm" data-testid="admin-nav">
              Admin
            </Text>
            {ADMIN_NAV.map(link)}
          </>
        )}
      </AppShell.Navbar>
      <AppShell.Main id="main" tabIndex={-1}>
        {!admin && !scope.loading && scope.project && !scope.canWrite && (
          <Alert color="yellow" mb="md" data-testid="read-only">
            {READ_ONLY_HINT} You can look at everything here; changes are disabled.
          </Alert>
        )}
        {/* a project's pages mount once the project is known: their lists filter by it (an empty id is a 400); the
            organization's pages need only the organization */}
        {admin ? (
          <Outlet />
        ) : scope.loading ? null : !tenantNav ? (
          <Navigate to="/staff/fleet" replace />
        ) : !scope.project && !(scope.organization && isOrganizationPath(location.pathname)) ? (
          <NoProject />
        ) : (
          <Outlet />
        )}
      </AppShell.Main>
    </AppShell>
  )
}
