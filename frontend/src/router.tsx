import { Center, Loader, Modal } from '@mantine/core'
import { useRef, type ComponentType } from 'react'
import { Navigate, Outlet, createBrowserRouter, useLocation } from 'react-router'
import { ScopeProvider } from './auth/scope'
import { useSession } from './auth/session'
import { Layout } from './components/Layout'
import { ProblemAlert } from './components/ProblemAlert'
import { prefetchInstances, prefetchShell } from './loaders'
import { NotFoundPage } from './pages/NotFound'
import { prefetchCapacity, prefetchFleet } from './pages/admin/queries'
import { SignInForm, SignInPage } from './pages/SignIn'

// Screens load on first visit (one chunk each), so sign-in and the shell download first. A route's `lazy` (not
// React.lazy in Suspense) loads the chunk while the navigation's loaders run, and the screen renders once it is
// there: no fallback in between, which React would keep on screen for at least 300 ms.
function screen<M>(load: () => Promise<M>, pick: (module: M) => ComponentType) {
  return async () => ({ Component: pick(await load()) })
}

const pages = {
  dashboard: screen(() => import('./pages/Dashboard'), (m) => m.DashboardPage),
  sshKeys: screen(() => import('./pages/SshKeys'), (m) => m.SshKeysPage),
  instances: screen(() => import('./pages/Instances'), (m) => m.InstancesPage),
  instanceDetail: screen(() => import('./pages/InstanceDetail'), (m) => m.InstanceDetailPage),
  launch: screen(() => import('./pages/Launch'), (m) => m.LaunchPage),
  networking: screen(() => import('./pages/Networking'), (m) => m.NetworkingPage),
  volumes: screen(() => import('./pages/Volumes'), (m) => m.VolumesPage),
  billing: screen(() => import('./pages/Billing'), (m) => m.BillingPage),
  invoiceDetail: screen(() => import('./pages/Billing'), (m) => m.InvoiceDetailPage),
  leases: screen(() => import('./pages/Leases'), (m) => m.LeasesPage),
  vpcDetail: screen(() => import('./pages/VpcDetail'), (m) => m.VpcDetailPage),
  tokens: screen(() => import('./pages/Tokens'), (m) => m.TokensPage),
  members: screen(() => import('./pages/Members'), (m) => m.MembersPage),
  healthEvents: screen(() => import('./pages/HealthEvents'), (m) => m.HealthEventsPage),
  audit: screen(() => import('./pages/Audit'), (m) => m.AuditPage),
  clusters: screen(() => import('./pages/Clusters'), (m) => m.ClustersPage),
  clusterDetail: screen(() => import('./pages/ClusterDetail'), (m) => m.ClusterDetailPage),
  adminFleet: screen(() => import('./pages/admin/Fleet'), (m) => m.AdminFleetPage),
  adminPriceBooks: screen(() => import('./pages/admin/billing/PriceBooks'), (m) => m.AdminPriceBooksPage),
  adminRuns: screen(() => import('./pages/admin/billing/InvoiceRuns'), (m) => m.AdminInvoiceRunsPage),
  adminRun: screen(() => import('./pages/admin/billing/InvoiceRuns'), (m) => m.AdminInvoiceRunPage),
  adminInvoices: screen(() => import('./pages/admin/billing/Invoices'), (m) => m.AdminInvoicesPage),
  adminInvoice: screen(() => import('./pages/admin/billing/Invoices'), (m) => m.AdminInvoicePage),
  adminCapacity: screen(() => import('./pages/admin/Capacity'), (m) => m.AdminCapacityPage),
  adminTenants: screen(() => import('./pages/admin/Tenants'), (m) => m.AdminTenantsPage),
  adminIncidents: screen(() => import('./pages/admin/Incidents'), (m) => m.AdminIncidentsPage),
  adminAudit: screen(() => import('./pages/admin/Audit'), (m) => m.AdminAuditPage),
  adminHealth: screen(() => import('./pages/admin/HealthEvents'), (m) => m.AdminHealthEventsPage),
}

const loading = (
  <Center mih="100vh">
    <Loader role="status" aria-label="Loading" />
  </Center>
)

/**
 * Screens behind sign-in: an anonymous visitor (or a session still owing a code) goes to /sign-in?next=…. A session
 * that ends while a screen is open (expired, or signed out in another tab) instead gets a sign-in dialog over that
 * screen, so what was typed into its forms is still there once the same person has signed in again; someone else
 * signing in starts afresh at the console's home.
 */
function RequireSession() {
  const session = useSession()
  const location = useLocation()
  const signedInAs = useRef<string | null>(null)
  if (session.isPending) return loading
  if (session.isError) return <ProblemAlert error={session.error} title="The console cannot reach the API" />
  const state = session.data
  const signedIn = state.authenticated && !state.second_factor_needed
  if (signedIn) signedInAs.current = state.email ?? signedInAs.current
  const here = location.pathname + location.search
  if (!signedIn && signedInAs.current === null) return <Navigate to={`/sign-in?next=${encodeURIComponent(here)}`} replace />
  const before = signedInAs.current
  return (
    <>
      <ScopeProvider>
        <Outlet />
      </ScopeProvider>
      <Modal
        opened={!signedIn}
        onClose={() => {}}
        withCloseButton={false}
        closeOnEscape={false}
        closeOnClickOutside={false}
        centered
        title="Sign in again"
      >
        <SignInForm
          next={here}
          title="Your session has ended"
          intro="Sign in again to carry on where you were; what you typed is kept."
          initialEmail={before ?? ''}
          onSignedIn={(email) => {
            if (!before || !email || email.toLowerCase() !== before.toLowerCase()) window.location.assign('/')
          }}
        />
      </Modal>
    </>
  )
}

export const router = createBrowserRouter([
  { path: '/sign-in', element: <SignInPage /> },
  {
    element: <RequireSession />,
    loader: prefetchShell,
    hydrateFallbackElement: loading,
    children: [
      {
        element: <Layout />,
        children: [
          { index: true, lazy: pages.dashboard },
          { path: 'ssh-keys', lazy: pages.sshKeys },
          { path: 'instances', lazy: pages.instances, loader: prefetchInstances },
          { path: 'instances/new', lazy: pages.launch },
          { path: 'instances/:id', lazy: pages.instanceDetail },
          { path: 'networking', lazy: pages.networking },
          { path: 'networking/vpcs/:id', lazy: pages.vpcDetail },
          { path: 'volumes', lazy: pages.volumes },
          { path: 'leases', lazy: pages.leases },
          { path: 'billing', lazy: pages.billing },
          { path: 'billing/invoices/:id', lazy: pages.invoiceDetail },
          { path: 'api-tokens', lazy: pages.tokens },
          { path: 'members', lazy: pages.members },
          { path: 'audit-log', lazy: pages.audit },
          { path: 'health-events', lazy: pages.healthEvents },
          { path: 'clusters', lazy: pages.clusters },
          { path: 'clusters/:id', lazy: pages.clusterDetail },
          // the admin portal (staff only: the page shows Not found to anyone else, as the API answers them 404); not under
          // /admin, a prefix the server keeps for itself (apps.core.console RESERVED_PREFIXES)
          { path: 'staff/fleet', lazy: pages.adminFleet, loader: prefetchFleet },
          { path: 'staff/billing', element: <Navigate to="/staff/billing/price-books" replace /> },
          { path: 'staff/billing/price-books', lazy: pages.adminPriceBooks },
          { path: 'staff/billing/invoice-runs', lazy: pages.adminRuns },
          { path: 'staff/billing/invoice-runs/:id', lazy: pages.adminRun },
          { path: 'staff/billing/invoices', lazy: pages.adminInvoices },
          { path: 'staff/billing/invoices/:id', lazy: pages.adminInvoice },
          { path: 'staff/capacity', lazy: pages.adminCapacity, loader: prefetchCapacity },
          { path: 'staff/audit-log', lazy: pages.adminAudit },
          { path: 'staff/tenants', lazy: pages.adminTenants },
          { path: 'staff/incidents', lazy: pages.adminIncidents },
          { path: 'staff/health-events', lazy: pages.adminHealth },
          { path: '*', element: <NotFoundPage /> },
        ],
      },
    ],
  },
])
