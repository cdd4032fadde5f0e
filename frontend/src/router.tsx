import { Center, Loader } from '@mantine/core'
import { Suspense, lazy, type ReactNode } from 'react'
import { Navigate, Outlet, createBrowserRouter, useLocation } from 'react-router'
import { ScopeProvider } from './auth/scope'
import { useSession } from './auth/session'
import { Layout } from './components/Layout'
import { ProblemAlert } from './components/ProblemAlert'
import { NotFoundPage } from './pages/NotFound'
import { prefetchCapacity, prefetchFleet } from './pages/admin/queries'
import { SignInPage } from './pages/SignIn'

// Screens load on first visit (one chunk each), so sign-in and the shell download first.
const DashboardPage = lazy(() => import('./pages/Dashboard').then((m) => ({ default: m.DashboardPage })))
const SshKeysPage = lazy(() => import('./pages/SshKeys').then((m) => ({ default: m.SshKeysPage })))
const InstancesPage = lazy(() => import('./pages/Instances').then((m) => ({ default: m.InstancesPage })))
const InstanceDetailPage = lazy(() => import('./pages/InstanceDetail').then((m) => ({ default: m.InstanceDetailPage })))
const LaunchPage = lazy(() => import('./pages/Launch').then((m) => ({ default: m.LaunchPage })))
const NetworkingPage = lazy(() => import('./pages/Networking').then((m) => ({ default: m.NetworkingPage })))
const VolumesPage = lazy(() => import('./pages/Volumes').then((m) => ({ default: m.VolumesPage })))
const BillingPage = lazy(() => import('./pages/Billing').then((m) => ({ default: m.BillingPage })))
const InvoiceDetailPage = lazy(() => import('./pages/Billing').then((m) => ({ default: m.InvoiceDetailPage })))
const LeasesPage = lazy(() => import('./pages/Leases').then((m) => ({ default: m.LeasesPage })))
const VpcDetailPage = lazy(() => import('./pages/VpcDetail').then((m) => ({ default: m.VpcDetailPage })))
const TokensPage = lazy(() => import('./pages/Tokens').then((m) => ({ default: m.TokensPage })))
const MembersPage = lazy(() => import('./pages/Members').then((m) => ({ default: m.MembersPage })))
const HealthEventsPage = lazy(() => import('./pages/HealthEvents').then((m) => ({ default: m.HealthEventsPage })))
const AuditPage = lazy(() => import('./pages/Audit').then((m) => ({ default: m.AuditPage })))
const ClustersPage = lazy(() => import('./pages/Clusters').then((m) => ({ default: m.ClustersPage })))
const AdminFleetPage = lazy(() => import('./pages/admin/Fleet').then((m) => ({ default: m.AdminFleetPage })))
const adminBilling = {
  priceBooks: lazy(() => import('./pages/admin/billing/PriceBooks').then((m) => ({ default: m.AdminPriceBooksPage }))),
  runs: lazy(() => import('./pages/admin/billing/InvoiceRuns').then((m) => ({ default: m.AdminInvoiceRunsPage }))),
  run: lazy(() => import('./pages/admin/billing/InvoiceRuns').then((m) => ({ default: m.AdminInvoiceRunPage }))),
  invoices: lazy(() => import('./pages/admin/billing/Invoices').then((m) => ({ default: m.AdminInvoicesPage }))),
  invoice: lazy(() => import('./pages/admin/billing/Invoices').then((m) => ({ default: m.AdminInvoicePage }))),
}
const AdminCapacityPage = lazy(() => import('./pages/admin/Capacity').then((m) => ({ default: m.AdminCapacityPage })))
const AdminTenantsPage = lazy(() => import('./pages/admin/Tenants').then((m) => ({ default: m.AdminTenantsPage })))
const AdminIncidentsPage = lazy(() => import('./pages/admin/Incidents').then((m) => ({ default: m.AdminIncidentsPage })))
const AdminAuditPage = lazy(() => import('./pages/admin/Audit').then((m) => ({ default: m.AdminAuditPage })))
const ClusterDetailPage = lazy(() => import('./pages/ClusterDetail').then((m) => ({ default: m.ClusterDetailPage })))

function screen(element: ReactNode) {
  return <Suspense fallback={<Loader role="status" aria-label="Loading" />}>{element}</Suspense>
}

/** Screens behind sign-in: an anonymous visitor (or a session still owing a code) goes to /sign-in?next=… */
function RequireSession() {
  const session = useSession()
  const location = useLocation()
  if (session.isPending)
    return (
      <Center mih="100vh">
        <Loader role="status" aria-label="Loading" />
      </Center>
    )
  if (session.isError) return <ProblemAlert error={session.error} title="The console cannot reach the API" />
  if (!session.data.authenticated || session.data.second_factor_needed) {
    const next = encodeURIComponent(location.pathname + location.search)
    return <Navigate to={`/sign-in?next=${next}`} replace />
  }
  return (
    <ScopeProvider>
      <Outlet />
    </ScopeProvider>
  )
}

export const router = createBrowserRouter([
  { path: '/sign-in', element: <SignInPage /> },
  {
    element: <RequireSession />,
    children: [
      {
        element: <Layout />,
        children: [
          { index: true, element: screen(<DashboardPage />) },
          { path: 'ssh-keys', element: screen(<SshKeysPage />) },
          { path: 'instances', element: screen(<InstancesPage />) },
          { path: 'instances/new', element: screen(<LaunchPage />) },
          { path: 'instances/:id', element: screen(<InstanceDetailPage />) },
          { path: 'networking', element: screen(<NetworkingPage />) },
          { path: 'networking/vpcs/:id', element: screen(<VpcDetailPage />) },
          { path: 'volumes', element: screen(<VolumesPage />) },
          { path: 'leases', element: screen(<LeasesPage />) },
          { path: 'billing', element: screen(<BillingPage />) },
          { path: 'billing/invoices/:id', element: screen(<InvoiceDetailPage />) },
          { path: 'api-tokens', element: screen(<TokensPage />) },
          { path: 'members', element: screen(<MembersPage />) },
          { path: 'audit-log', element: screen(<AuditPage />) },
          { path: 'health-events', element: screen(<HealthEventsPage />) },
          { path: 'clusters', element: screen(<ClustersPage />) },
          { path: 'clusters/:id', element: screen(<ClusterDetailPage />) },
          // the admin portal (staff only: the page shows Not found to anyone else, as the API answers them 404); not under
          // /admin, a prefix the server keeps for itself (apps.core.console RESERVED_PREFIXES)
          { path: 'staff/fleet', element: screen(<AdminFleetPage />), loader: prefetchFleet },
          { path: 'staff/billing', element: <Navigate to="/staff/billing/price-books" replace /> },
          { path: 'staff/billing/price-books', element: screen(<adminBilling.priceBooks />) },
          { path: 'staff/billing/invoice-runs', element: screen(<adminBilling.runs />) },
          { path: 'staff/billing/invoice-runs/:id', element: screen(<adminBilling.run />) },
          { path: 'staff/billing/invoices', element: screen(<adminBilling.invoices />) },
          { path: 'staff/billing/invoices/:id', element: screen(<adminBilling.invoice />) },
          { path: 'staff/capacity', element: screen(<AdminCapacityPage />), loader: prefetchCapacity },
          { path: 'staff/tenants', element: screen(<AdminTenantsPage />) },
          { path: 'staff/incidents', element: screen(<AdminIncidentsPage />) },
          { path: 'staff/audit-log', element: screen(<AdminAuditPage />) },
          { path: '*', element: <NotFoundPage /> },
        ],
      },
    ],
  },
])
