package io.apnsmock.junit5;

import io.apnsmock.AdminClient;
import io.apnsmock.ApnsMockContainer;
import io.apnsmock.ApnsMockTeam;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * A JUnit 5 extension that runs apns-mock's container for a test class: started before the
 * first test, reset ({@code POST /v1/reset}) before each, removed after the last.
 *
 * <pre>{@code
 * class WelcomePushTest {
 *     @RegisterExtension
 *     static ApnsMockExtension apns = new ApnsMockExtension();   // or new ApnsMockExtension(new ApnsMockContainer(...).withTopics(...))
 *
 *     @Test
 *     void sendsTheWelcomePush() {
 *         service.pushTo(apns.apnsUrl(), apns.caFile(), apns.providerToken());   // your APNs client, pointed at the mock
 *         Notification push = apns.admin().waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5)).get(0);
 *         assertEquals("Welcome", push.get("payload", "aps", "alert", "title"));
 *     }
 * }
 * }</pre>
 *
 * With {@code @ExtendWith(ApnsMockExtension.class)} instead, a test method or constructor takes
 * the {@link ApnsMockContainer} or its {@link AdminClient} as a parameter.
 *
 * <p>A test method that takes an {@link ApnsMockTeam} parameter gets a team of its own, created
 * before the test (a random team ID, a fresh P-256 key, its apps: {@link TeamApps}, or one made
 * from the team ID) and deleted after it. Such a test is not preceded by the mock-wide reset
 * (which would reset every team, those of tests running at the same time too): its team starts
 * empty. Tests that run in parallel on one container should each take a team and assert through
 * {@code team.admin()}, which sees that team's records only.
 *
 * <pre>{@code
 * @Test
 * void sendsTheWelcomePush(ApnsMockTeam team) {
 *     service.pushTo(apns.apnsUrl(), apns.caFile(), team.providerToken(), team.topic());
 *     team.admin().waitFor(Query.ofToken(device), 1, Duration.ofSeconds(5));
 * }
 * }</pre>
 */
public class ApnsMockExtension implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback, ParameterResolver {
    private final ApnsMockContainer container;
    private boolean resetBeforeEach = true;

    /** The image {@code apns-mock:local} (or {@code APNS_MOCK_IMAGE}), the demo team and key. */
    public ApnsMockExtension() {
        this(new ApnsMockContainer());
    }

    /** A container configured beforehand ({@code withTeam}, {@code withKey}, {@code withTopics}, …). */
    public ApnsMockExtension(ApnsMockContainer container) {
        this.container = container;
    }

    /** Keep records, faults and devices from one test to the next (reset by default). */
    public ApnsMockExtension withoutResetBeforeEach() {
        resetBeforeEach = false;
        return this;
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        container.start();
    }

    @Override
    public void afterAll(ExtensionContext context) {
        container.stop();
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        boolean takesTeam = context.getTestMethod().map(Method::getParameterTypes)
                .map(types -> Arrays.asList(types).contains(ApnsMockTeam.class)).orElse(false);
        if (resetBeforeEach && !takesTeam && container.isRunning()) {
            container.admin().reset();
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        Class<?> type = parameter.getParameter().getType();
        return type == ApnsMockContainer.class || type == AdminClient.class || type == ApnsMockTeam.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        Class<?> type = parameter.getParameter().getType();
        if (!container.isRunning()) {
            throw new ParameterResolutionException("apns-mock's container is not running (register the extension on the class)");
        }
        if (type == ApnsMockTeam.class) {
            String[] apps = parameter.findAnnotation(TeamApps.class).map(TeamApps::value).orElse(new String[0]);
            ApnsMockTeam team = container.newTeam(apps);
            // Deleted when the context the parameter was resolved in ends: after the test method.
            context.getStore(ExtensionContext.Namespace.create(ApnsMockExtension.class, context.getUniqueId()))
                    .put(parameter.getParameter().toString() + "#" + parameter.getIndex(), (ExtensionContext.Store.CloseableResource) team::close);
            return team;
        }
        return type == AdminClient.class ? container.admin() : container;
    }

    /** A team of its own (see {@link ApnsMockContainer#newTeam}); the caller closes it. */
    public ApnsMockTeam newTeam(String... apps) {
        return container.newTeam(apps);
    }

    public ApnsMockContainer container() {
        return container;
    }

    /** {@code https://<host>:<port>} of the APNs listener (HTTP/2 over TLS). */
    public String apnsUrl() {
        return container.apnsUrl();
    }

    public String apnsHost() {
        return container.host();
    }

    public int apnsPort() {
        return container.apnsPort();
    }

    /** The CA certificate file the client must trust. */
    public Path caFile() {
        return container.caFile();
    }

    /** A provider token (ES256 JWT) for the configured team and key, signed here with the JDK. */
    public String providerToken() {
        return container.providerToken();
    }

    /** The provider key's PEM (the demo key read out of the container, or the one configured). */
    public String keyPem() {
        return container.keyPem();
    }

    public String teamId() {
        return container.teamId();
    }

    public String keyId() {
        return container.keyId();
    }

    public String topic() {
        return container.topic();
    }

    public AdminClient admin() {
        return container.admin();
    }
}
