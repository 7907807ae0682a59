package io.apnsmock.junit5;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The apps (bundle IDs) of the team an {@link ApnsMockExtension} makes for an
 * {@link io.apnsmock.ApnsMockTeam} parameter: {@code void test(@TeamApps("com.example.one") ApnsMockTeam team)}.
 * An app belongs to one team only: tests that run at the same time must name different apps.
 * Without it the team's one app is made from its team ID.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.PARAMETER)
public @interface TeamApps {
    String[] value();
}
